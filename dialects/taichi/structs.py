"""Taichi struct fields: `ti.Struct.field({...})`, `ti.types.struct(...)` / `ti.dataclass` types and their
`.field(...)`.

As Taichi builds them, a struct field is one field per member (`s.pos`, `s.mass`, nested structs are struct
fields again) sharing a shape; kernels address members (`s[i].pos += v` is `s.pos[i] += v`, compile_time.py),
so every member is an ordinary gk.array with its own gradient (`s.pos.grad`), cleared by `ti.ad.Tape` like
any field. A whole element as a kernel value (`p = s[i]`) and struct values built in kernels are not
supported (TaichiUnsupportedError): read and write the members."""

from __future__ import annotations

import inspect

from .errors import unsupported
from .fields import Field, element_type


class StructType:
    """`ti.types.struct(pos=ti.math.vec2, mass=float)`: the member types; `.field(shape=...)` makes a field."""

    def __init__(self, members: dict):
        self.members = {}
        for name, dt in members.items():
            self.members[name] = dt if isinstance(dt, StructType) else element_type(dt)

    def field(self, shape=None, name: str = "", offset=None, needs_grad: bool = False, needs_dual: bool = False,
              layout=None) -> "StructField":
        if offset is not None:
            raise unsupported("field offsets (offset=)", "index from 0")
        return StructField(self, shape, needs_grad, needs_dual, name)

    def __call__(self, *args, **kwargs):
        """A struct value in Python scope (a dict of the members' values)."""
        out = dict(zip(self.members, args))
        out.update(kwargs)
        return {k: out.get(k, 0) for k in self.members}

    def __repr__(self) -> str:
        members = ", ".join(f"{k}: {getattr(v, 'name', v)}" for k, v in self.members.items())
        return f"<ti struct {members}>"


class StructField:
    """A struct field: a Field (or StructField) per member, all of one shape."""

    _ti_struct_field = True

    def __init__(self, stype: StructType, shape, needs_grad: bool, needs_dual: bool, name: str = ""):
        self.stype = stype
        self._members = {}
        for key, t in stype.members.items():
            sub = f"{name}.{key}" if name else key
            if isinstance(t, StructType):
                self._members[key] = StructField(t, shape, needs_grad, needs_dual, sub)
            else:
                self._members[key] = Field(t, shape, needs_grad and t.scalar.is_float,
                                           needs_dual and t.scalar.is_float, sub)
        self.name = name

    def __getattr__(self, key):
        members = self.__dict__.get("_members", {})
        if key in members:
            return members[key]
        raise AttributeError(f"struct field {self.name or ''} has no member {key!r} (members: {', '.join(members)})")

    @property
    def keys(self) -> list:
        return list(self._members)

    @property
    def shape(self) -> tuple:
        return next(iter(self._members.values())).shape

    def _place(self, shape: tuple) -> None:
        for m in self._members.values():
            m._place(shape)

    def get_member_field(self, key):
        return self._members[key]

    # -------------------------------------------------------------- Python scope
    def __getitem__(self, key) -> "StructElement":
        return StructElement(self, key)

    def __setitem__(self, key, value) -> None:
        items = value.items() if isinstance(value, dict) else ((k, getattr(value, k)) for k in self._members)
        for k, v in items:
            self._members[k][key] = v

    def fill(self, value) -> None:
        for m in self._members.values():
            m.fill(value)

    def to_numpy(self) -> dict:
        """A dict of the members' data (copies), as Taichi's."""
        return {k: m.to_numpy() for k, m in self._members.items()}

    def from_numpy(self, data: dict) -> None:
        for k, v in data.items():
            self._members[k].from_numpy(v)

    def copy_from(self, other: "StructField") -> None:
        self.from_numpy(other.to_numpy())

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<ti struct field {self.name} {self.stype!r}>"


class StructElement:
    """`s[i]` in Python scope: its members read and written through (`s[i].mass = 2.0`)."""

    def __init__(self, f: StructField, key):
        object.__setattr__(self, "_f", f)
        object.__setattr__(self, "_key", key)

    def __getattr__(self, name):
        m = getattr(self._f, name)
        return m[self._key]

    def __setattr__(self, name, value) -> None:
        getattr(self._f, name)[self._key] = value

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._f.keys}


class _Struct:
    """`ti.Struct`: `ti.Struct.field(members, shape=...)`; struct values are not kernel values here."""

    @staticmethod
    def field(members: dict, methods=None, shape=None, name: str = "", offset=None, needs_grad: bool = False,
              needs_dual: bool = False, layout=None) -> StructField:
        if methods:
            raise unsupported("methods of struct fields (ti.Struct.field(..., methods=))",
                              "write @ti.func functions taking the members")
        return StructType(members).field(shape, name, offset, needs_grad, needs_dual, layout)

    def __call__(self, *args, **kwargs):
        raise unsupported("ti.Struct values", "use a struct field's members")


Struct = _Struct()


def struct(**members) -> StructType:
    """`ti.types.struct(name=dtype, ...)`."""
    return StructType(members)


def dataclass(cls) -> StructType:
    """`@ti.dataclass`: a struct type from the class's annotations (its methods are not supported)."""
    methods = [k for k, v in vars(cls).items() if callable(v) and not k.startswith("__")]
    if methods:
        raise unsupported(f"methods of a @ti.dataclass ({', '.join(methods)})",
                          "write @ti.func functions taking the members")
    return StructType(inspect.get_annotations(cls, eval_str=True))

