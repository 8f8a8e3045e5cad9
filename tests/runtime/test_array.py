"""gk.array: construction and dtype inference, annotations, host access, writes and versions, copies,
gradients/duals, NumPy and DLPack interop, and argument errors — on fake and real devices."""

import numpy as np
import pytest

import gradkit as gk
from gradkit.core.types import array_type


# --------------------------------------------------------------------------- annotations

def test_annotation_forms_return_the_ir_type():
    assert gk.array(dtype=float) is array_type(gk.float32, 1)
    assert gk.array(dtype=float, ndim=2) is array_type(gk.float32, 2)
    assert gk.array(dtype=gk.vec3) is array_type(gk.vec3, 1)
    assert gk.array(dtype=gk.float64, ndim=4) is array_type(gk.float64, 4)
    assert gk.array(dtype=int) is array_type(gk.int32, 1)
    assert gk.array(gk.mat33d, ndim=3) is array_type(gk.mat33d, 3)
    assert gk.array(float) is array_type(gk.float32, 1)
    assert gk.array(dtype=np.float64) is array_type(gk.float64, 1)
    assert gk.array1d(gk.vec2) is array_type(gk.vec2, 1)
    assert gk.array2d(float) is array_type(gk.float32, 2)
    assert gk.array3d(gk.int64) is array_type(gk.int64, 3)
    assert gk.array4d(bool) is array_type(gk.bool, 4)


@pytest.mark.parametrize("kwargs, arg", [({"dtype": complex}, "dtype"), ({"dtype": "U3"}, "dtype"),
                                         ({"dtype": float, "ndim": 5}, "ndim"),
                                         ({"dtype": float, "ndim": 0}, "ndim")])
def test_annotation_errors(kwargs, arg):
    with pytest.raises((TypeError, ValueError), match=arg):
        gk.array(**kwargs)


# --------------------------------------------------------------------------- construction

@pytest.mark.parametrize("data, dtype, shape", [
    (np.arange(5, dtype=np.float64), gk.float64, (5,)),          # NumPy keeps its dtype
    (np.arange(6, dtype=np.int64).reshape(2, 3), gk.int64, (2, 3)),
    (np.arange(4, dtype=np.int32), gk.int32, (4,)),
    (np.ones(3, dtype=np.float32), gk.float32, (3,)),
    (np.array([1, 2], dtype=np.uint32), gk.uint32, (2,)),
    (np.array([True, False]), gk.bool, (2,)),
    ([1.0, 2.5, 3.0], gk.float32, (3,)),                           # Python floats → float32 (Warp)
    ([[1, 2], [3, 4]], gk.int32, (2, 2)),                          # Python ints → int32
    ([2 ** 40, 1], gk.int64, (2,)),                                # ... unless they do not fit
    ([True, False, True], gk.bool, (3,)),
    (2.5, gk.float32, (1,)),                                       # a scalar is a one-element array
    (np.float64(2.5), gk.float64, (1,)),
    ((1, 2, 3), gk.int32, (3,)),
])
def test_dtype_and_shape_inference(data, dtype, shape, mem_device):
    a = gk.array(data, device=mem_device)
    assert a.dtype is dtype
    assert a.shape == shape and a.ndim == len(shape) and a.size == int(np.prod(shape))
    expected = np.asarray(data, dtype=dtype.np_dtype).reshape(shape)
    np.testing.assert_array_equal(a.numpy(), expected)
    assert a.numpy().dtype == dtype.np_dtype


def test_random_values_round_trip(mem_device, rng):
    for dtype in (gk.float32, gk.float64):
        x = rng.standard_normal((7, 5))
        a = gk.array(x, dtype=dtype, device=mem_device)
        np.testing.assert_allclose(a.numpy().astype(np.float64), x, rtol=1e-7 if dtype is gk.float32 else 0,
                                   atol=1e-6 if dtype is gk.float32 else 0)
        assert a.nbytes == x.size * dtype.np_dtype.itemsize


@pytest.mark.parametrize("dtype, comp", [(gk.vec3, (3,)), (gk.vec2d, (2,)), (gk.vec4i, (4,)),
                                         (gk.mat33, (3, 3)), (gk.mat22d, (2, 2))])
def test_vector_and_matrix_dtypes(dtype, comp, mem_device, rng):
    x = rng.integers(-5, 5, (4, 2, *comp)).astype(np.float64)
    a = gk.array(x, dtype=dtype, device=mem_device)
    assert a.shape == (4, 2) and a.dtype is dtype and a.size == 8
    assert a.numpy().shape == (4, 2, *comp)
    np.testing.assert_array_equal(a.numpy(), x)
    assert a.nbytes == x.size * dtype.scalar.np_dtype.itemsize
    single = gk.array(x[0, 0], dtype=dtype, device=mem_device)    # one value → a one-element array
    assert single.shape == (1,)
    flat = gk.array(x.reshape(-1), dtype=dtype, shape=(8,), device=mem_device)
    np.testing.assert_array_equal(flat.numpy(), x.reshape(8, *comp))


def test_shape_argument_and_empty_constructors(mem_device):
    a = gk.array(shape=(2, 3), dtype=gk.float64, device=mem_device)
    assert a.shape == (2, 3) and a.dtype is gk.float64 and not a.numpy().any()
    b = gk.array(np.arange(6.0), shape=(3, 2), device=mem_device)
    np.testing.assert_array_equal(b.numpy(), np.arange(6.0).reshape(3, 2))
    f = gk.array(gk.vec2d, shape=3, device=mem_device)         # a dtype first is the element type
    assert f.dtype is gk.vec2d and f.shape == (3,)
    e = gk.zeros(0, device=mem_device)
    assert e.size == 0 and e.nbytes == 0 and e.numpy().shape == (0,) and len(e) == 0
    e.zero_()
    e.fill_(3.0)
    assert gk.array([], device=mem_device).shape == (0,)


def test_non_contiguous_input_is_copied(mem_device, rng):
    x = rng.standard_normal((6, 8))
    for view in (x[:, ::2], x.T, x[::-1]):
        a = gk.array(view, device=mem_device)
        np.testing.assert_array_equal(a.numpy(), view)
    v = rng.standard_normal((5, 3, 2))
    a = gk.array(v[:, :, 0], dtype=gk.vec3d, device=mem_device)
    np.testing.assert_array_equal(a.numpy(), v[:, :, 0])


def test_input_is_never_mutated_or_aliased(mem_device, rng):
    x = rng.standard_normal(10)
    saved = x.copy()
    a = gk.array(x, device=mem_device)
    a.fill_(5.0)
    a[3] = -1.0
    a.assign(np.zeros(10))
    np.testing.assert_array_equal(x, saved)
    lst = [1.0, 2.0]
    b = gk.array(lst, device=mem_device)
    b[0] = 9.0
    assert lst == [1.0, 2.0]
    c = gk.from_numpy(x, device=mem_device)
    c.zero_()
    np.testing.assert_array_equal(x, saved)


@pytest.mark.parametrize("kwargs, exc, arg", [
    ({"data": [[1.0, 2.0], [3.0]]}, ValueError, "data"),                       # ragged
    ({"data": np.array([1 + 2j])}, TypeError, "data"),                         # complex
    ({"data": ["a", "b"]}, TypeError, "data"),                                 # strings
    ({"data": np.zeros(3, dtype=np.float16)}, TypeError, "data"),              # unsupported NumPy dtype
    ({"data": np.zeros((1, 1, 1, 1, 2))}, ValueError, "data"),                 # 5-D
    ({"data": np.zeros((4, 2)), "dtype": gk.vec3}, ValueError, "data"),        # wrong component count
    ({"data": [1.0], "dtype": complex}, TypeError, "dtype"),
    ({"data": [1.0], "dtype": "foo"}, TypeError, "dtype"),
    ({"data": [1.0], "dtype": gk.array(dtype=float)}, TypeError, "dtype"),
    ({"shape": (-1, 2)}, ValueError, "shape"),
    ({"shape": (2.5,)}, TypeError, "shape"),
    ({"shape": (1, 1, 1, 1, 1)}, ValueError, "shape"),
    ({"data": np.arange(5.0), "shape": (2, 2)}, ValueError, "shape"),
    ({"data": [1, 2], "requires_grad": True}, ValueError, "requires_grad"),     # integer array
    ({"data": [True], "requires_dual": True}, ValueError, "requires_dual"),
    ({"data": [1.0, 2.0], "ndim": 2}, ValueError, "ndim"),
])
def test_bad_input_names_the_argument(kwargs, exc, arg, fake_backends):
    with pytest.raises(exc, match=arg):
        gk.array(device="fakehost", **kwargs)


def test_constructor_errors(fake_backends):
    with pytest.raises(ValueError, match="shape"):
        gk.zeros(-3, device="fakehost")
    with pytest.raises(ValueError, match="requires_grad"):
        gk.zeros(3, dtype=gk.int32, device="fakehost", requires_grad=True)
    with pytest.raises(TypeError, match="dtype"):
        gk.ones(3, dtype=np.complex64, device="fakehost")
    with pytest.raises(TypeError, match="x"):
        gk.from_numpy(np.array([object()]), device="fakehost")
    with pytest.raises(ValueError, match="value"):
        gk.full(3, [1.0, 2.0], dtype=gk.vec3, device="fakehost")
    with pytest.raises(TypeError, match="a"):
        gk.zeros_like(np.zeros(3))


# --------------------------------------------------------------------------- constructors

def test_zeros_ones_full_empty(mem_device):
    z = gk.zeros((2, 3), device=mem_device)
    assert z.dtype is gk.float32 and z.shape == (2, 3) and not z.numpy().any()
    o = gk.ones(4, dtype=gk.vec2d, device=mem_device)
    np.testing.assert_array_equal(o.numpy(), np.ones((4, 2)))
    f = gk.full(3, 2.5, device=mem_device)
    assert f.dtype is gk.float32 and (f.numpy() == 2.5).all() and f.version == 0
    fi = gk.full((2, 2), 7, device=mem_device)
    assert fi.dtype is gk.int32 and (fi.numpy() == 7).all()
    fv = gk.full(2, [1.0, 2.0, 3.0], device=mem_device)
    assert fv.dtype is gk.vec3
    np.testing.assert_array_equal(fv.numpy(), [[1, 2, 3], [1, 2, 3]])
    fm = gk.full(2, np.eye(3), dtype=gk.mat33d, device=mem_device)
    np.testing.assert_array_equal(fm.numpy()[1], np.eye(3))
    e = gk.empty(5, dtype=gk.int64, device=mem_device, label="scratch")
    assert e.shape == (5,) and e.dtype is gk.int64 and e.label == "scratch"
    b = gk.ones(3, dtype=gk.bool, device=mem_device)
    assert b.nbytes == 3 and b.numpy().all()


def test_like_constructors(mem_device):
    a = gk.array(np.arange(6.0).reshape(2, 3), device=mem_device, requires_grad=True)
    z = gk.zeros_like(a)
    assert z.shape == a.shape and z.dtype is a.dtype and z.device is a.device
    assert z.requires_grad and not z.numpy().any()
    assert not gk.zeros_like(a, requires_grad=False).requires_grad
    o = gk.ones_like(a, requires_grad=False)
    assert (o.numpy() == 1).all() and o.grad is None


def test_from_numpy_and_array_copy(mem_device, rng):
    x = rng.standard_normal((3, 4))
    a = gk.from_numpy(x, device=mem_device)
    assert a.dtype is gk.float64
    b = gk.array(a)                                 # copy, same device by default
    assert b.device is a.device and b.buffer is not a.buffer
    np.testing.assert_array_equal(b.numpy(), x)
    c = gk.array(a, dtype=gk.float32)
    assert c.dtype is gk.float32
    np.testing.assert_allclose(c.numpy(), x, rtol=1e-6)
    a.zero_()
    np.testing.assert_array_equal(b.numpy(), x)


# --------------------------------------------------------------------------- attributes

def test_attributes_and_device(mem_device):
    a = gk.zeros((4, 5), dtype=gk.float64, device=mem_device)
    assert isinstance(a.device, gk.Device) and a.device.name == gk.get_device(mem_device).name
    assert a.device is gk.get_device(mem_device)
    assert a.nbytes == 4 * 5 * 8 and len(a) == 4
    assert a.grad is None and a.dual is None and not a.requires_grad and not a.requires_dual
    assert a.label is None
    a.label = "positions"
    assert a.label == "positions" and "positions" in repr(a)
    assert hash(a) == hash(a) and a != gk.zeros((4, 5), dtype=gk.float64, device=mem_device)


def test_requires_grad_and_dual(mem_device):
    a = gk.array([1.0, 2.0], device=mem_device)
    a.requires_grad = True
    g = a.grad
    assert isinstance(g, gk.array) and g.shape == a.shape and g.dtype is a.dtype and g.device is a.device
    assert not g.numpy().any() and not g.requires_grad
    a.requires_grad = True
    assert a.grad is g                       # not reallocated
    a.requires_grad = False
    assert a.grad is None
    a.grad = gk.ones(2, device=mem_device)
    assert a.requires_grad and a.grad.numpy().tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="grad"):
        a.grad = gk.ones(3, device=mem_device)
    i = gk.array([1, 2], device=mem_device)
    with pytest.raises(ValueError, match="requires_grad"):
        i.requires_grad = True
    d = gk.zeros(3, dtype=gk.vec3d, device=mem_device, requires_dual=True)
    assert d.dual.shape == (3,) and d.dual.dtype is gk.vec3d
    d._set_dual(None)
    assert d.dual is None and not d.requires_dual
    with pytest.raises(ValueError, match="dual"):
        d._set_dual(gk.zeros(3, device=mem_device))


# --------------------------------------------------------------------------- host access and versions

def test_numpy_is_zero_copy_on_host_memory(fake_backends):
    a = gk.array([1.0, 2.0, 3.0], device="fakehost")
    v = a.numpy()
    v[0] = 42.0
    assert a[0] == 42.0 and np.shares_memory(a.numpy(), v)
    d = gk.array([1.0, 2.0, 3.0], device="fakedev:0")
    w = d.numpy()
    w[0] = 42.0
    assert d[0] == 1.0                        # device memory: numpy() is a copy


def test_element_access(mem_device):
    a = gk.array(np.arange(12, dtype=np.float64).reshape(3, 4), device=mem_device)
    assert a[1, 2] == 6.0 and isinstance(a[1, 2], np.float64)
    np.testing.assert_array_equal(a[2], [8, 9, 10, 11])
    row = a[0]
    row[0] = 100.0                            # reads return copies
    assert a[0, 0] == 0.0
    v0 = a.version
    a[1, 2] = -5
    assert a[1, 2] == -5.0 and a.version == v0 + 1
    a[0] = [1, 1, 1, 1]
    np.testing.assert_array_equal(a.numpy()[0], [1, 1, 1, 1])
    with pytest.raises(IndexError):
        a[3, 0]
    vec = gk.array(np.arange(6.0).reshape(2, 3), dtype=gk.vec3, device=mem_device)
    np.testing.assert_array_equal(vec[1], [3, 4, 5])
    vec[0] = (7, 8, 9)
    np.testing.assert_array_equal(vec.numpy()[0], [7, 8, 9])
    one = gk.zeros(1, device=mem_device)
    one[None] = 2.5
    assert one[None] == 2.5
    with pytest.raises(IndexError, match="one-element"):
        a[None]


def test_writes_bump_version_reads_do_not(mem_device):
    a = gk.zeros(4, device=mem_device)
    assert a.version == 0
    a.numpy()
    a[0]
    np.asarray(a)
    assert a.version == 0
    versions = []
    for op in (lambda: a.assign([1, 2, 3, 4]), lambda: a.fill_(2.0), a.zero_, lambda: a.__setitem__(1, 3.0),
               a._bump):
        op()
        versions.append(a.version)
    assert versions == [1, 2, 3, 4, 5]


def test_assign_fill_zero(mem_device, rng):
    a = gk.zeros((2, 3), dtype=gk.float64, device=mem_device)
    x = rng.standard_normal((2, 3))
    assert a.assign(x) is a
    np.testing.assert_array_equal(a.numpy(), x)
    b = gk.zeros((2, 3), dtype=gk.float64, device=mem_device)
    b.assign(a)
    np.testing.assert_array_equal(b.numpy(), x)
    b.assign(gk.array(x.astype(np.float32), device=mem_device))
    np.testing.assert_allclose(b.numpy(), x, rtol=1e-6)
    b.assign(1.5)
    assert (b.numpy() == 1.5).all()
    with pytest.raises(ValueError, match="values"):
        a.assign(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="values"):
        a.assign(gk.zeros(6, device=mem_device))
    ints = gk.zeros(3, dtype=gk.int32, device=mem_device)
    with pytest.raises(TypeError, match="values"):
        ints.assign([0.5, 1.5, 2.5])
    ints.assign(np.array([1, 2, 3], dtype=np.int64))
    assert ints.numpy().tolist() == [1, 2, 3]
    a.fill_(3.0)
    assert (a.numpy() == 3.0).all()
    a.zero_()
    assert not a.numpy().any()
    v = gk.zeros(2, dtype=gk.vec3, device=mem_device)
    v.fill_([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(v.numpy(), [[1, 2, 3], [1, 2, 3]])


def test_copy_and_to(fake_backends, rng):
    x = rng.standard_normal(8)
    a = gk.array(x, device="fakehost", requires_grad=True)
    assert a.to("fakehost") is a and a.to(a.device) is a
    for dev in ("fakedev:0", "fakedev:1"):
        b = a.to(dev)
        assert b.device.name == dev and b.requires_grad and not b.grad.numpy().any()
        np.testing.assert_array_equal(b.numpy(), x)
        c = b.copy()
        assert c.device is b.device and c.buffer is not b.buffer
        b.zero_()
        np.testing.assert_array_equal(c.numpy(), x)
        back = c.to("fakehost")
        np.testing.assert_array_equal(back.numpy(), x)
    assert fake_backends["fakedev"].calls.get("copy", 0) >= 2          # same-device copies stay on device


# --------------------------------------------------------------------------- NumPy / DLPack interop

def test_array_protocol(mem_device, rng):
    x = rng.standard_normal((3, 2))
    a = gk.array(x, device=mem_device)
    np.testing.assert_allclose(np.asarray(a), x.astype(np.float32))
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    assert np.array(a, copy=True) is not None
    assert len(list(a)) == 3
    if gk.get_device(mem_device).impl.host_view(a.device.info, a.buffer) is None:
        with pytest.raises(ValueError):
            np.asarray(a, copy=False)
    else:
        assert np.shares_memory(np.asarray(a, copy=False), a.numpy())


def test_dlpack(fake_backends, rng):
    x = rng.standard_normal((4, 3))
    a = gk.array(x, dtype=gk.float64, device="fakehost")
    y = np.from_dlpack(a)
    assert np.shares_memory(y, a.numpy())
    np.testing.assert_array_equal(y, x)
    assert a.__dlpack_device__()[0] == 1          # kDLCPU
    b = gk.from_dlpack(x, device="fakehost")
    np.testing.assert_array_equal(b.numpy(), x)
    v = gk.from_dlpack(np.from_dlpack(gk.array(x, dtype=gk.vec3d, device="fakehost")), dtype=gk.vec3d,
                       device="fakedev:0")
    np.testing.assert_array_equal(v.numpy(), x)
    d = gk.array(x, device="fakedev:0")
    with pytest.raises(BufferError, match="host"):
        d.__dlpack__()
    with pytest.raises(TypeError, match="obj"):
        gk.from_dlpack(object())


def test_repr_shows_values(mem_device):
    a = gk.array([1.5, 2.5], device=mem_device, requires_grad=True)
    r = repr(a)
    assert "1.5" in r and "2.5" in r and "float32" in r and "requires_grad=True" in r
    big = gk.zeros(10000, device=mem_device)
    assert "..." in repr(big)
