"""Parameter packing (memref expansion) and grid evaluation with fake
pointers (CPU only)."""

import ctypes

import pytest

from flashmlir import _launch as L
from flashmlir import _manifest as M
from flashmlir._errors import LaunchError

from helpers import FakeTensor, contiguous_strides, example

B, HQ, HKV, NQ, NK, D, DV = 2, 8, 2, 1000, 4097, 128, 128
ENV = {"B": B, "Hq": HQ, "Hkv": HKV, "Nq": NQ, "Nk": NK, "D": D, "Dv": DV, "G": HQ // HKV}


def spec(**kw):
    return M.parse_manifest(example(**kw), check_files=False)


def bhsd(base, shape, dtype="torch.bfloat16", elsize=2, offset=0):
    return FakeTensor(base, shape, contiguous_strides(shape), dtype, offset, elsize)


def bshd_view(base, shape_bhsd, dtype="torch.bfloat16"):
    b, h, n, d = shape_bhsd
    t = FakeTensor(base, (b, n, h, d), contiguous_strides((b, n, h, d)), dtype)
    return t.transpose12()


def args_bhsd():
    return {
        "q": bhsd(0x7f0000000000, (B, HQ, NQ, D)),
        "k": bhsd(0x7f0010000000, (B, HKV, NK, D)),
        "v": bhsd(0x7f0020000000, (B, HKV, NK, DV)),
        "out": bhsd(0x7f0030000000, (B, HQ, NQ, DV)),
        "lse": bhsd(0x7f0040000000, (B, HQ, NQ), "torch.float32", 4),
    }


def test_pack_order_and_values():
    packed = L.pack_params(spec(), args_bhsd(), ENV)
    assert len(packed) == 53
    labels = [p.label for p in packed]
    assert labels == [l for l, _ in spec().slots()]
    q = packed[:11]
    assert [p.value for p in q] == [0x7f0000000000, 0x7f0000000000, 0,
                                    B, HQ, NQ, D,
                                    HQ * NQ * D, NQ * D, D, 1]
    assert [p.type for p in q] == ["ptr", "ptr"] + ["i64"] * 9
    k = packed[11:22]
    assert [p.value for p in k][3:] == [B, HKV, NK, D, HKV * NK * D, NK * D, D, 1]
    lse = packed[44:]
    assert [p.value for p in lse] == [0x7f0040000000, 0x7f0040000000, 0, B, HQ, NQ,
                                      HQ * NQ, NQ, 1]


def test_pack_bshd_is_a_strided_view():
    a = args_bhsd()
    a["q"] = bshd_view(0x7f0000000000, (B, HQ, NQ, D))
    packed = {p.label: p.value for p in L.pack_params(spec(), a, ENV)}
    assert [packed[f"q.sizes[{i}]"] for i in range(4)] == [B, HQ, NQ, D]
    # [B, N, H, D] storage: strides (N*H*D, H*D, D, 1) permuted to B, H, N, D
    assert [packed[f"q.strides[{i}]"] for i in range(4)] == [NQ * HQ * D, D, HQ * D, 1]


def test_storage_offset_folds_into_aligned_pointer():
    a = args_bhsd()
    a["k"] = FakeTensor(0x7f0010000000, (B, HKV, NK, D), contiguous_strides((B, HKV, NK, D)),
                        "torch.bfloat16", offset=64)
    packed = {p.label: p.value for p in L.pack_params(spec(), a, ENV)}
    assert packed["k.allocated"] == 0x7f0010000000
    assert packed["k.aligned"] == 0x7f0010000000 + 128
    assert packed["k.offset"] == 0


def test_memref_values_are_accepted():
    a = args_bhsd()
    a["q"] = L.Memref(16, 32, 5, (B, HQ, NQ, D), (1, 1, 1, 1), "bf16")
    packed = L.pack_params(spec(), a, ENV)
    assert [p.value for p in packed[:3]] == [16, 32, 5]


@pytest.mark.parametrize("name,tensor,match", [
    ("q", bhsd(0x1000, (B, HQ, NQ, D), "torch.float16"), "must be bf16, got f16"),
    ("q", bhsd(0x1000, (B, HQ, NQ)), "rank 4 but the tensor has 3"),
    ("q", bhsd(0x1000, (B, HQ, NQ + 1, D)), r"sizes \[2, 8, 1001, 128\] differ"),
    ("k", bhsd(0x1000, (B, HQ, NK, D)), r"\[B, Hkv, Nk, D\] = \[2, 2, 4097, 128\]"),
    ("q", bhsd(0x1008, (B, HQ, NQ, D)), "not 16-byte aligned"),
    ("q", FakeTensor(0x1000, (B, HQ, NQ, D), (HQ * NQ * D, NQ * D, 1, NQ)), "last dimension must be contiguous"),
    ("q", FakeTensor(0x1000, (B, HQ, NQ, D), (-1, NQ * D, D, 1)), "negative"),
])
def test_pack_errors(name, tensor, match):
    a = args_bhsd()
    a[name] = tensor
    with pytest.raises(LaunchError, match=match):
        L.pack_params(spec(), a, ENV)


def test_missing_tensor():
    a = args_bhsd()
    del a["lse"]
    with pytest.raises(LaunchError, match="no tensor given for parameter 'lse'"):
        L.pack_params(spec(), a, ENV)


def test_scalar_params():
    m = example()
    m["params"] += [{"name": "scale", "type": "f32", "value": "scale"},
                    {"name": "wl", "type": "i64", "value": "window_left"},
                    {"name": "nblk", "type": "i32", "value": "ceildiv(Nk, 64)"},
                    {"name": "c", "type": "u32", "value": 3}]
    s = M.parse_manifest(m, check_files=False)
    a = args_bhsd()
    a.update(scale=0.125, window_left=-1)
    packed = L.pack_params(s, a, ENV)
    tail = packed[-4:]
    assert [(p.label, p.type, p.value) for p in tail] == [
        ("scale", "f32", 0.125), ("wl", "i64", -1), ("nblk", "i32", 65), ("c", "u32", 3)]
    assert isinstance(tail[0].ctype(), ctypes.c_float)
    assert tail[1].ctype().value == -1
    # out of range and unknown names
    a.update(window_left=2 ** 40)
    m["params"][-3]["type"] = "i32"
    s = M.parse_manifest(m, check_files=False)
    with pytest.raises(LaunchError, match="does not fit in i32"):
        L.pack_params(s, a, ENV)
    del a["scale"]
    with pytest.raises(LaunchError, match="unknown name 'scale'"):
        L.pack_params(s, a, ENV)


def test_ctypes_widths():
    expect = {"ptr": (ctypes.c_uint64, 8), "i64": (ctypes.c_int64, 8),
              "i32": (ctypes.c_int32, 4), "u32": (ctypes.c_uint32, 4),
              "f32": (ctypes.c_float, 4), "f64": (ctypes.c_double, 8)}
    for t, (ct, size) in expect.items():
        p = L.PackedParam("x", t, 1.0 if t.startswith("f") else 1)
        assert type(p.ctype()) is ct and ctypes.sizeof(p.ctype()) == size
        if t in M.SCALAR_SIZES:
            assert M.SCALAR_SIZES[t] == size
        else:
            assert M.slot_size(t) == size


def test_grid():
    s = spec()
    assert L.grid_dims(s, ENV) == (8, 8, 2)
    assert L.grid_dims(s, dict(ENV, Nq=1)) == (1, 8, 2)
    assert L.grid_dims(s, dict(ENV, Nq=129)) == (2, 8, 2)
    s2 = spec(grid=["ceildiv(Nq, 128) * Hq * B"])
    assert L.grid_dims(s2, ENV) == (128, 1, 1)
    with pytest.raises(LaunchError, match="grid y = 70000 exceeds the device limit 65535"):
        L.grid_dims(s, dict(ENV, Hq=70000))
    with pytest.raises(LaunchError, match="evaluates to 0"):
        L.grid_dims(s, dict(ENV, Nq=0))
    with pytest.raises(LaunchError, match="unknown name"):
        L.grid_dims(s, {"Nq": 5})
    # A persistent kernel: at most SMS blocks (the device's multiprocessors).
    s4 = spec(grid=["min(ceildiv(Nq, 128) * Hq * B, SMS)", "1", "1"])
    assert L.grid_dims(s4, dict(ENV, SMS=132)) == (min(128, 132), 1, 1)
    assert L.grid_dims(s4, dict(ENV, SMS=100)) == (100, 1, 1)
    s3 = spec(grid=["Nq * 0.5", "Hq", "B"])
    with pytest.raises(LaunchError, match="not an integer"):
        L.grid_dims(s3, ENV)


def test_describe_params():
    text = L.describe_params(L.pack_params(spec(), args_bhsd(), ENV))
    assert "q.allocated" in text and "0x7f0000000000" in text and "lse.strides[2]" in text


def test_dtype_names():
    assert L.dtype_name("torch.bfloat16") == "bf16"
    assert L.dtype_name("torch.float16") == "f16"
    assert L.dtype_name("torch.float32") == "f32"
    assert L.dtype_name("bfloat16") == "bf16"


def test_multiprocessors_override(monkeypatch):
    monkeypatch.delenv("FLASHMLIR_SMS", raising=False)
    assert L.multiprocessors(132) == 132
    monkeypatch.setenv("FLASHMLIR_SMS", "3")
    assert L.multiprocessors(132) == 3
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("FLASHMLIR_SMS", bad)
        with pytest.raises(LaunchError, match="FLASHMLIR_SMS must be a positive integer"):
            L.multiprocessors(132)
