"""Devices and the backend plugin registry: specs, caching, the default device, scoped devices,
entry-point plugins (lazy loading, failures as warnings) and DeviceError messages."""

import importlib.metadata
import subprocess
import sys
import warnings

import pytest

import gradkit as gk
from gradkit.backends import registry
from gradkit.runtime.launch import device as device_mod

from tests.conftest import DEVICES, BrokenBackend, NoDeviceBackend


@pytest.fixture
def restore_default():
    saved = device_mod._default
    yield
    device_mod._default = saved


def test_specs_resolve_to_cached_devices(fake_backends):
    d0 = gk.get_device("fakedev")
    assert d0.name == "fakedev:0" and d0.backend == "fakedev" and d0.description == "fake fakedev device 0"
    assert gk.get_device("fakedev:0") is d0 and gk.get_device(" fakedev:0 ") is d0
    d1 = gk.get_device("fakedev:1")
    assert d1.name == "fakedev:1" and d1 is not d0 and d1.ordinal == 1
    assert gk.get_device(d1) is d1
    host = gk.get_device("fakehost")
    assert host is gk.get_device("fakehost:0") and host.name == "fakehost"
    assert host.impl is fake_backends["fakehost"] and host.info.name == "fakehost"


def test_device_equality_hash_repr(fake_backends):
    d = gk.get_device("fakedev:1")
    assert d == "fakedev:1" and d != "fakedev:0" and d == gk.get_device("fakedev:1")
    assert {d: 1}["fakedev:1"] == 1 and hash(d) == hash("fakedev:1")
    assert str(d) == "fakedev:1" and "fakedev:1" in repr(d) and "fake fakedev device 1" in repr(d)


def test_get_devices_lists_every_device(fake_backends):
    names = [d.name for d in gk.get_devices()]
    for name in ("fakedev:0", "fakedev:1", "fakehost", *DEVICES):
        assert name in names
    assert len(names) == len(set(names))
    if "cpu" in names:
        assert names[0] == "cpu"
    assert "fakehost" in gk.backends.available() and "fakedev" in registry.available()


def test_default_device_and_scopes(fake_backends, restore_default):
    gk.set_device("fakehost")
    assert gk.get_device() is gk.get_device("fakehost")
    assert gk.zeros(2).device.name == "fakehost"
    with gk.ScopedDevice("fakedev:1") as d:
        assert d.name == "fakedev:1" and gk.get_device().name == "fakedev:1"
        assert gk.zeros(2).device.name == "fakedev:1"
        with gk.ScopedDevice("fakedev:0"):
            assert gk.get_device().name == "fakedev:0"
        assert gk.get_device().name == "fakedev:1"
        scope = gk.ScopedDevice("fakehost")
        with scope:                            # a reused scope object nests too
            with scope:
                assert gk.get_device().name == "fakehost"
            assert gk.get_device().name == "fakehost"
        assert gk.get_device().name == "fakedev:1"
    assert gk.get_device().name == "fakehost"
    try:
        with gk.ScopedDevice("fakedev:0"):
            raise KeyError("boom")
    except KeyError:
        pass
    assert gk.get_device().name == "fakehost"


def test_default_is_cpu(restore_default):
    device_mod._default = None
    if "cpu" in {d.name for d in gk.get_devices()}:     # not DEVICES: GRADKIT_TEST_DEVICES may filter it out
        assert gk.get_device().name == "cpu" and gk.get_device(None) is gk.get_device("cpu")
    else:
        with pytest.raises(gk.DeviceError, match="cpu"):
            gk.get_device()


def test_bad_specs(fake_backends):
    with pytest.raises(gk.DeviceError, match=r"fakedev:2.*2 device\(s\): fakedev:0, fakedev:1"):
        gk.get_device("fakedev:2")
    with pytest.raises(gk.DeviceError, match="installed backends: .*fakehost"):
        gk.get_device("nosuchbackend")
    with pytest.raises(gk.DeviceError, match="entry-point group 'gradkit.backends'"):
        gk.get_device("nosuchbackend:1")
    with pytest.raises(ValueError, match="device number"):
        gk.get_device("fakedev:x")
    with pytest.raises(ValueError):
        gk.get_device(":1")
    with pytest.raises(TypeError, match="device"):
        gk.get_device(3)
    assert issubclass(gk.DeviceError, gk.GradkitError) and issubclass(gk.DeviceError, RuntimeError)


def test_plugin_without_devices_explains(monkeypatch):
    monkeypatch.setitem(registry.INSTALL_HINTS, "nodev", "pip install nodev-driver")
    registry.register("nodev", NoDeviceBackend)
    try:
        for _ in range(2):                                   # the failure is remembered, same message
            with pytest.raises(gk.DeviceError, match="no usable device.*pip install nodev-driver"):
                gk.get_device("nodev")
        assert "nodev" in registry.available()            # loaded, just no device ...
        assert all(d.backend != "nodev" for d in gk.get_devices())   # ... so it lists none
    finally:
        registry.unregister("nodev")


def test_plugin_whose_devices_call_fails():
    class Crashing(NoDeviceBackend):
        def devices(self):
            raise OSError("driver crashed")
    registry.register("crashing", Crashing)
    try:
        with pytest.raises(gk.DeviceError, match="'crashing' could not list its devices: OSError: driver"):
            gk.get_device("crashing:0")
        assert all(d.backend != "crashing" for d in gk.get_devices())
    finally:
        registry.unregister("crashing")


def test_broken_plugin_warns_and_raises_device_error():
    registry.register("broken", BrokenBackend)
    try:
        with pytest.warns(RuntimeWarning, match="'broken'.*RuntimeError: no frobnicator found"):
            names = registry.available()
        assert "broken" not in names
        with warnings.catch_warnings():
            warnings.simplefilter("error")               # reported once, not on every call
            registry.available()
            with pytest.raises(gk.DeviceError, match="'broken' failed to load: RuntimeError: no frobnicator"):
                gk.get_device("broken")
        assert registry.failure("broken") == "RuntimeError: no frobnicator found"
    finally:
        registry.unregister("broken")
    with pytest.raises(gk.DeviceError, match="unknown"):
        registry.get_backend("broken")


PLUGIN_SOURCE = '''
import numpy as np
from gradkit.backends.base import Backend, DeviceInfo
IMPORTED = True

class Plugin(Backend):
    name = "ep_plugin"
    def devices(self):
        return [DeviceInfo(f"ep_plugin:{k}", f"entry-point plugin {k}", k) for k in range(2)]
    def alloc(self, device, nbytes):
        return np.zeros(nbytes, np.uint8)
    def fill_zero(self, device, buf, nbytes):
        buf[:nbytes] = 0
    def host_view(self, device, buf):
        return buf
'''


def test_entry_point_plugins_load_lazily(tmp_path, monkeypatch):
    (tmp_path / "gk_ep_plugin_mod.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    good = importlib.metadata.EntryPoint("ep_plugin", "gk_ep_plugin_mod:Plugin", registry.GROUP)
    bad = importlib.metadata.EntryPoint("ep_missing", "gk_no_such_module_xyz:Backend", registry.GROUP)
    registry.register("ep_plugin", good)
    registry.register("ep_missing", bad)
    try:
        assert "gk_ep_plugin_mod" not in sys.modules          # registering imports nothing
        dev = gk.get_device("ep_plugin:1")
        assert "gk_ep_plugin_mod" in sys.modules
        assert dev.name == "ep_plugin:1" and dev.backend == "ep_plugin"
        assert dev.description == "entry-point plugin 1"
        a = gk.zeros(3, device="ep_plugin")
        assert a.device.name == "ep_plugin:0" and a.numpy().tolist() == [0, 0, 0]
        with pytest.warns(RuntimeWarning, match="'ep_missing'.*gk_no_such_module_xyz.*ModuleNotFoundError"):
            names = gk.backends.available()
        assert "ep_plugin" in names and "ep_missing" not in names
        with pytest.raises(gk.DeviceError, match="ep_missing.*ModuleNotFoundError"):
            gk.get_device("ep_missing")
    finally:
        registry.unregister("ep_plugin")
        registry.unregister("ep_missing")
        sys.modules.pop("gk_ep_plugin_mod", None)


def test_entry_point_discovery(monkeypatch):
    eps = [importlib.metadata.EntryPoint("x", "pkg.mod:X", registry.GROUP),
           importlib.metadata.EntryPoint("x", "other.mod:X", registry.GROUP),
           importlib.metadata.EntryPoint("y", "pkg.mod:Y", registry.GROUP)]
    seen = {}

    def fake_entry_points(**kwargs):
        seen.update(kwargs)
        return eps
    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    found = registry._entry_points()
    assert seen == {"group": "gradkit.backends"}
    assert sorted(found) == ["x", "y"] and found["x"].value == "pkg.mod:X"


def test_builtins_are_declared_as_entry_points():
    declared = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="gradkit.backends")}
    assert declared.get("cpu") == "gradkit.backends.cpu:CPUBackend"
    assert declared.get("opencl") == "gradkit.backends.opencl:OpenCLBackend"
    assert {"cpu", "opencl"} <= set(registry.names())


def test_register_validates_names():
    with pytest.raises(ValueError):
        registry.register("a:b", NoDeviceBackend)
    with pytest.raises(ValueError):
        registry.register("", NoDeviceBackend)


def test_synchronize(fake_backends):
    gk.get_device("fakedev:1")
    gk.synchronize("fakedev:1")
    assert fake_backends["fakedev"].synced == ["fakedev:1"]
    gk.get_device("fakehost")
    gk.synchronize()
    assert "fakehost" in fake_backends["fakehost"].synced
    assert fake_backends["fakedev"].synced.count("fakedev:1") == 2


def test_reregistering_a_plugin_drops_only_its_devices(fake_backends):
    host = gk.get_device("fakehost")
    dev = gk.get_device("fakedev:0")
    registry.register("fakedev", type(fake_backends["fakedev"]))
    assert gk.get_device("fakehost") is host
    assert gk.get_device("fakedev:0") is not dev


def test_builtin_backend_loads_without_scanning_entry_points():
    """`cpu` comes from gradkit's own table before anything lists plugins; listing still finds every
    entry point (the NumPy plugin), and the same instance stays in use."""
    code = ("import gradkit as gk, gradkit.backends.registry as r, sys\n"
            "cpu = r.get_backend('cpu')\n"
            "print(r._specs is None, 'importlib.metadata' in sys.modules)\n"
            "print('numpy' in r.names(), r.get_backend('cpu') is cpu)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "True", "True"]


def test_builtins_are_listed_without_gradkits_metadata(monkeypatch):
    """A checkout imported from PYTHONPATH has no entry points (no dist-info): cpu and opencl are still listed,
    and a third-party plugin's entry point is kept beside them."""
    import importlib.metadata

    from gradkit.backends import registry

    class FakeEntryPoint:
        name, value = "thirdparty", "somewhere:Backend"

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: [FakeEntryPoint()])
    monkeypatch.setattr(registry, "_specs", None)
    specs = registry._all_specs()
    assert specs["cpu"].value == registry.BUILTIN["cpu"] and specs["opencl"].value == registry.BUILTIN["opencl"]
    assert specs["thirdparty"].value == "somewhere:Backend"


def test_a_plugin_wrapping_the_cpu_launch_is_not_relaunched_past_it():
    """A subclass of the CPU backend that overrides launch(compiled, dims, args) but not relaunch gets every
    launch through its own launch (repeating the CPU backend's packed launch would bypass it, and its launch
    takes no token); the CPU backend itself keeps its relaunch."""
    from gradkit.backends.cpu import CPUBackend
    from gradkit.runtime.launch.kernel import repeatable_launch

    class Wrapping(CPUBackend):
        def launch(self, compiled, dims, args):
            return super().launch(compiled, dims, args)

    class Both(Wrapping):
        def relaunch(self, compiled, again):
            return False

    assert repeatable_launch(CPUBackend()) is not None
    assert repeatable_launch(Wrapping()) is None
    assert repeatable_launch(Both()) is not None
    assert repeatable_launch(object()) is None
