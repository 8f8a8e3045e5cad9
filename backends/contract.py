"""The version of the backend plugin contract this gradkit speaks (backends/README.md, "The contract and its
versions"); its history and what each version declares live in backends/capabilities.py."""

CONTRACT_VERSION = 3
