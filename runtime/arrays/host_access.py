"""Host access for `gk.array`: `.numpy()`, `np.asarray`, element reads/writes, DLPack and the checksums
that let `Tape.backward` see writes made through NumPy/DLPack views; split out of array.py to keep it small."""

from __future__ import annotations

import zlib

import numpy as np


def _checksum(data: np.ndarray) -> int:
    if data.flags.c_contiguous:          # an array's own host view always is: crc32 reads its buffer as is
        return zlib.crc32(data)
    return zlib.crc32(memoryview(np.ascontiguousarray(data)).cast("B"))


class HostAccess:
    """The host-side reads and writes of `gk.array` (a base class: `array` in array.py holds the state)."""

    __slots__ = ()

    def numpy(self) -> np.ndarray:
        """The data as NumPy, shaped (*shape, *dtype.shape): a zero-copy view on host-memory devices, a
        fresh copy elsewhere. Writes through a view into an array a tape recorded are caught at backward."""
        if self._host is not None:
            self._exposed = True
            if self._held:
                self._fingerprint()
            return self._host.view()
        return self._read()

    def _fingerprint(self, now: bool = False) -> int:
        """Remember (and return) a checksum of the data at this version before handing out a writable view,
        so that `Tape.backward` can tell whether the recorded values were changed through it (see
        `modified`). `now` recomputes it: a view handed out earlier may have changed the data since."""
        if now or self._crc is None or self._crc[0] != self.version:
            self._crc = (self.version, _checksum(self._host))
        return self._crc[1]

    def modified_since(self, version: int, crc: int | None = None) -> bool:
        """True when the data may differ from what it was at `version`: written through gradkit (the
        version moved) or through a NumPy/DLPack view (the checksum moved from `crc`, the one a tape took
        when it recorded the array, else the one taken when a view was handed out at that version)."""
        if self.version != version:
            return True
        if crc is None:
            held = self._crc
            crc = held[1] if held is not None and held[0] == version else None
        return crc is not None and _checksum(self._host) != crc

    def _read(self) -> np.ndarray:
        """The data for gradkit's own reads (no fingerprint: nothing is handed to the user)."""
        if self._host is not None:
            return self._host.view()
        out = np.empty(self._host_shape, dtype=self.dtype.scalar.np_dtype)
        if self.nbytes:
            self.device.impl.copy_to_host(self.device.info, self.buffer, out)
        return out

    def _key(self, key):
        if key is None:           # Taichi's x[None]: the one element of a one-element array
            if self.size != 1:
                raise IndexError(f"a[None] needs a one-element array; this one has shape {self.shape}")
            return (0,) * self.ndim
        return key

    def __getitem__(self, key):
        value = self._read()[self._key(key)]
        return value.copy() if isinstance(value, np.ndarray) else value

    def __setitem__(self, key, value) -> None:
        key = self._key(key)
        if isinstance(value, HostAccess):
            value = value.numpy()
        self._check_value(value, "value")
        if self._host is not None:
            self._host[key] = value
        else:
            host = self._read()
            host[key] = value
            self._write_host(host)
        self._bump()

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):
        return iter([self[k] for k in range(self.shape[0])])

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        host = self._read()
        if dtype is not None and np.dtype(dtype) != host.dtype:
            if copy is False:
                raise ValueError("np.asarray(gk.array, dtype=..., copy=False): a dtype change needs a copy")
            return host.astype(dtype)
        if self._host is None:
            if copy is False:
                raise ValueError(f"a gk.array on {self.device.name} cannot be viewed without a copy "
                                 "(copy=False); use .numpy()")
            return host
        return host.copy() if copy else self.numpy()

    # DLPack (host-memory devices only) ---------------------------------------------
    def _dlpack_source(self) -> np.ndarray:
        if self._host is None:
            raise BufferError(f"DLPack export needs a host-memory array (device 'cpu'); this one is on "
                              f"{self.device.name}: use a.to('cpu') or a.numpy()")
        return self.numpy()

    def __dlpack__(self, stream=None, **kwargs):
        return self._dlpack_source().__dlpack__(**{k: v for k, v in kwargs.items() if v is not None})

    def __dlpack_device__(self):
        return self._dlpack_source().__dlpack_device__()
