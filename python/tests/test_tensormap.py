"""TMA tensor map parameters (CPU only): the cuda.h values of _tensormap's
table, the arguments of cuTensorMapEncodeTiled computed for contiguous,
transposed and size-1 tensors, the errors for tensors the driver cannot map
(naming the tensor and the rule, before anything is launched), and the
launch through the fake driver, which records what was encoded and writes
it into the map's 128 bytes (test_cuda_fake.decode_fake_map). The plan
paths (native and ctypes) are in test_native_launcher.py."""

import ctypes
import os
import re

import pytest

from flashmlir import _cuda, _kernels, _launch
from flashmlir import _manifest as M
from flashmlir import _tensormap as T
from flashmlir._errors import CudaError, LaunchError

from helpers import FakeTensor, contiguous_strides, example, fake_ptx, write_kernel
from test_cuda_fake import decode_fake_map, fake, fake_map_bytes  # noqa: F401 (fixture)

B, HQ, HKV, NQ, NK, D = 2, 8, 2, 1000, 4097, 128
ENV = {"B": B, "Hq": HQ, "Hkv": HKV, "Nq": NQ, "Nk": NK, "D": D, "Dv": D, "G": HQ // HKV}
CUDA_H = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include", "cuda.h")


# -- the table against cuda.h ------------------------------------------------------------

def _enums(text):
    """{enumerator: value} of every `typedef enum ... { ... }` in `text`."""
    values = {}
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)   # and the doc comments' copies
    for body in re.findall(r"typedef\s+enum\s+\w*\s*\{(.*?)\}", text, re.S):
        nxt = 0
        for item in body.split(","):
            m = re.match(r"\s*(\w+)\s*(?:=\s*(\w+))?\s*$", item)
            if not m:
                continue
            nxt = int(m.group(2), 0) if m.group(2) else nxt
            values[m.group(1)] = nxt
            nxt += 1
    return values


@pytest.mark.skipif(not os.path.isfile(CUDA_H), reason=f"no {CUDA_H}")
def test_table_is_cuda_h():
    with open(CUDA_H) as f:
        text = f.read()
    e = _enums(text)
    P = "CU_TENSOR_MAP_"
    assert T.DATA_TYPES == {"f16": e[P + "DATA_TYPE_FLOAT16"], "f32": e[P + "DATA_TYPE_FLOAT32"],
                            "bf16": e[P + "DATA_TYPE_BFLOAT16"]}
    assert {k: v[0] for k, v in T.SWIZZLES.items()} == {
        "none": e[P + "SWIZZLE_NONE"], "32B": e[P + "SWIZZLE_32B"], "64B": e[P + "SWIZZLE_64B"],
        "128B": e[P + "SWIZZLE_128B"]}
    assert T.L2_PROMOTIONS == {"none": e[P + "L2_PROMOTION_NONE"],
                               "64B": e[P + "L2_PROMOTION_L2_64B"],
                               "128B": e[P + "L2_PROMOTION_L2_128B"],
                               "256B": e[P + "L2_PROMOTION_L2_256B"]}
    assert T.OOB_FILLS == {"zero": e[P + "FLOAT_OOB_FILL_NONE"],
                           "nan": e[P + "FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"]}
    assert T.INTERLEAVES == {"none": e[P + "INTERLEAVE_NONE"]}
    qwords = re.search(r"#define\s+CU_TENSOR_MAP_NUM_QWORDS\s+(\d+)", text).group(1)
    assert T.MAP_BYTES == 8 * int(qwords)
    # the signature _cuda declares
    sig = re.search(r"CUresult CUDAAPI cuTensorMapEncodeTiled\((.*?)\);", text).group(1)
    assert [a.split()[-1].lstrip("*") for a in sig.split(",")] == [
        "tensorMap", "tensorDataType", "tensorRank", "globalAddress", "globalDim",
        "globalStrides", "boxDim", "elementStrides", "interleave", "swizzle", "l2Promotion",
        "oobFill"]
    (argtypes,) = [s[2] for s in _cuda._SIGNATURES if s[0] == "cuTensorMapEncodeTiled"]
    assert len(argtypes) == 12


# -- encoding arguments ------------------------------------------------------------------

def _tmap(name, tensor, box, swizzle="128B", dtype="bf16", **kw):
    return dict({"name": name, "type": "tensormap", "tensor": tensor, "dtype": dtype,
                 "box": box, "swizzle": swizzle}, **kw)


def manifest():
    """The example with maps of q (first), k and lse (last)."""
    m = example()
    m["params"] = ([_tmap("q_map", "q", [1, 1, 128, 64])] + m["params"]
                   + [_tmap("k_map", "k", [1, 1, 64, 32], "64B", l2_promotion="256B",
                            oob_fill="nan"),
                      _tmap("lse_map", "lse", [1, 2, 128], "none", "f32")])
    return m


def spec():
    return M.parse_manifest(manifest(), check_files=False)


def tensor(base, shape, dtype="torch.bfloat16", elsize=2):
    return FakeTensor(base, shape, contiguous_strides(shape), dtype, 0, elsize)


def tensors(q=None):
    return {"q": q or tensor(0x7f0000000000, (B, HQ, NQ, D)),
            "k": tensor(0x7f0010000000, (B, HKV, NK, D)),
            "v": tensor(0x7f0020000000, (B, HKV, NK, D)),
            "out": tensor(0x7f0030000000, (B, HQ, NQ, D)),
            "lse": tensor(0x7f0040000000, (B, HQ, NQ), "torch.float32", 4)}


def maps(packed):
    return {p.label: p.value for p in packed if p.type == "tensormap"}


def test_encoding_of_contiguous_tensors():
    packed = _launch.pack_params(spec(), tensors(), ENV)
    assert [p.label for p in packed] == [l for l, _ in spec().slots()]
    m = maps(packed)
    assert m["q_map"] == T.MapArg("q", 0x7f0000000000, T.Encoding(
        9, (D, NQ, HQ, B), (2 * D, 2 * NQ * D, 2 * HQ * NQ * D), (64, 128, 1, 1), (1, 1, 1, 1),
        0, 3, 2, 0))
    assert m["k_map"] == T.MapArg("k", 0x7f0010000000, T.Encoding(
        9, (D, NK, HKV, B), (2 * D, 2 * NK * D, 2 * HKV * NK * D), (32, 64, 1, 1),
        (1, 1, 1, 1), 0, 2, 3, 1))
    assert m["lse_map"] == T.MapArg("lse", 0x7f0040000000, T.Encoding(
        7, (NQ, HQ, B), (4 * NQ, 4 * HQ * NQ), (128, 2, 1), (1, 1, 1), 0, 0, 2, 0))
    assert ("map of q at 0x7f0000000000: bf16, dims [128, 1000, 8, 2], byte strides "
            "[256, 256000, 2048000], box [64, 128, 1, 1], swizzle 128B, l2 promotion 128B, "
            "oob fill zero") in _launch.describe_params(packed)


def test_encoding_of_a_transposed_tensor():
    """[B, N, H, D] memory viewed as [B, H, N, D]: dims in the view's order,
    strides of the memory."""
    q = tensor(0x7f0000000000, (B, NQ, HQ, D)).transpose12()
    assert q.shape == (B, HQ, NQ, D) and q.stride() == (NQ * HQ * D, D, HQ * D, 1)
    enc = maps(_launch.pack_params(spec(), tensors(q), ENV))["q_map"].encoding
    assert enc.global_dim == (D, NQ, HQ, B)
    assert enc.global_strides == (2 * HQ * D, 2 * D, 2 * NQ * HQ * D)


def test_size_one_dimension_takes_any_stride():
    """A size-1 dimension's stride (torch may give it any value) is passed
    as the inner dimensions' extent rounded up to 16 bytes."""
    env = dict(ENV, Hq=1, Hkv=1, B=1, G=1)
    q = FakeTensor(0x7f0000000000, (1, 1, NQ, D), (7, 1, D, 1))
    args = {"q": q, "k": tensor(0x7f0010000000, (1, 1, NK, D)),
            "v": tensor(0x7f0020000000, (1, 1, NK, D)),
            "out": tensor(0x7f0030000000, (1, 1, NQ, D)),
            "lse": tensor(0x7f0040000000, (1, 1, NQ), "torch.float32", 4)}
    m = maps(_launch.pack_params(spec(), args, env))
    assert m["q_map"].encoding.global_strides == (2 * D, 2 * NQ * D, 2 * NQ * D)
    assert m["lse_map"].encoding.global_strides == (4 * NQ, 4 * NQ)
    # [1, 3, 1, 8]: rows of 8 x 2 = 16 bytes, a size-1 dimension (16), 3 rows of 16 bytes
    # (their stride), a size-1 dimension after them (48)
    assert T.encoding("x", spec().params[0], (1, 3, 1, 8), (1, 8, 1, 1), 2).global_strides == (
        16, 16, 48)


@pytest.mark.parametrize("q,match", [
    # rows of 132 elements: 264 bytes, not a multiple of 16
    (FakeTensor(0x7f0000000000, (B, HQ, NQ, D), (HQ * NQ * 132, NQ * 132, 132, 1)),
     r"tensor map q_map of q: dimension 2 has a stride of 132 elements = 264 bytes; a tensor "
     r"map needs strides that are multiples of 16 bytes and less than 2\^40 \(strides "
     r"\[1056000, 132000, 132, 1\]\)"),
    (FakeTensor(0x7f0000000000, (B, HQ, NQ, D), (HQ * NQ * D, NQ * D + 4, D, 1)),
     r"tensor map q_map of q: dimension 1 has a stride of 128004 elements = 256008 bytes"),
    (FakeTensor(0x7f0000000000, (B, HQ, NQ, D), (2 ** 39, NQ * D, D, 1)),
     r"tensor map q_map of q: dimension 0 has a stride of 549755813888 elements = "
     r"1099511627776 bytes"),
])
def test_strides_the_driver_cannot_map(q, match):
    with pytest.raises(LaunchError, match=f"^{spec().name}: {match}"):
        _launch.pack_params(spec(), tensors(q), ENV)


def test_map_rules_on_other_tensors():
    sp = spec()
    p = sp.params[0]
    with pytest.raises(LaunchError, match=r"where: dimension 2 has size 0; a tensor map needs "
                                          r"sizes in \[1, 2\^32\]"):
        T.encoding("where", p, (1, 1, 0, 8), (0, 0, 8, 1), 2)
    with pytest.raises(LaunchError, match=r"where: dimension 0 has size 4294967297"):
        T.encoding("where", p, (2 ** 32 + 1, 1, 1, 8), (8, 8, 8, 1), 2)
    with pytest.raises(LaunchError, match=r"where: the innermost dimension must have stride 1 "
                                          r"element for a tensor map, got strides \[8, 8, 1, 2\]"):
        T.encoding("where", p, (1, 1, 8, 4), (8, 8, 1, 2), 2)
    # the memref checks run first: a strided innermost dimension or a misaligned
    # pointer names the memref (and the map is never encoded)
    bad = FakeTensor(0x7f0000000000, (B, HQ, NQ, D), (HQ * NQ * D, NQ * D, 1, NQ))
    with pytest.raises(LaunchError, match="parameter q: the last dimension must be contiguous"):
        _launch.pack_params(sp, tensors(bad), ENV)
    odd = FakeTensor(0x7f0000000008, (B, HQ, NQ, D), contiguous_strides((B, HQ, NQ, D)))
    with pytest.raises(LaunchError, match="parameter q: data pointer 0x7f0000000008 is not "
                                          "16-byte aligned"):
        _launch.pack_params(sp, tensors(odd), ENV)


def test_box_rules():
    assert T.box_error([1, 8], 2, "none") is None
    assert T.box_error([1, 64], 2, "128B") is None and T.box_error([1, 4], 4, "none") is None
    assert "is not a multiple of 16 bytes" in T.box_error([1, 4], 2, "none")
    assert "at most 32 bytes, got 32 x 2 = 64" in T.box_error([1, 32], 2, "32B")


def test_storage_is_aligned():
    stores = [T.storage() for _ in range(8)]
    assert all(ctypes.addressof(s) % T.STORAGE_ALIGNMENT == 0 and len(s) == 128 and
               not any(s) for s in stores)


# -- through the fake driver ---------------------------------------------------------------

def _ptx(entry="fa_fwd_kernel", align=64):
    params = [f".param .align {align} .b8 {entry}_param_0[128]"]
    params += [f".param .u64 {entry}_param_{i}" for i in range(1, 54)]
    params += [f".param .align {align} .b8 {entry}_param_{i}[128]" for i in (54, 55)]
    return (".version 8.4\n.target sm_80\n.address_size 64\n"
            f".visible .entry {entry}(\n" + ",\n".join(params) + "\n)\n{\n\tret;\n}\n")


def _kernel(fake, tmp_path):
    m = manifest()
    write_kernel(str(tmp_path), m, ptx=_ptx())
    sp = M.load_manifest(str(tmp_path / (m["name"] + ".json")))
    sizes = [M.slot_size(t) for _, t in sp.slots()]
    fake.param_sizes = fake.slot_sizes = sizes
    return _kernels.load_kernel(sp, 0)


def test_launch_encodes_the_maps(fake, tmp_path):
    k = _kernel(fake, tmp_path)
    args = tensors()
    _launch.launch(k, args, ENV, stream=0x77)
    (l,) = fake.launches
    assert len(fake.encodes) == 3
    q, kk, lse = fake.encodes
    assert all(r["map"] % 64 == 0 for r in fake.encodes)
    assert {n: r for n, r in zip(("q", "k", "lse"), fake.encodes)} == {
        "q": dict(q, data_type=9, rank=4, address=0x7f0000000000, dims=(D, NQ, HQ, B),
                  strides=(2 * D, 2 * NQ * D, 2 * HQ * NQ * D), box=(64, 128, 1, 1),
                  element_strides=(1, 1, 1, 1), interleave=0, swizzle=3, l2_promotion=2,
                  oob_fill=0),
        "k": dict(kk, address=0x7f0010000000, dims=(D, NK, HKV, B), box=(32, 64, 1, 1),
                  swizzle=2, l2_promotion=3, oob_fill=1),
        "lse": dict(lse, data_type=7, rank=3, dims=(NQ, HQ, B), strides=(4 * NQ, 4 * HQ * NQ),
                    box=(128, 2, 1), element_strides=(1, 1, 1), swizzle=0)}
    # the kernel got each map's 128 bytes by value, around the memrefs
    raw = l["raw"]
    assert [len(r) for r in raw] == [128] + [8] * 53 + [128, 128]
    assert [decode_fake_map(raw[i]) for i in (0, 54, 55)] == [
        {k: v for k, v in r.items() if k != "map"} for r in fake.encodes]
    assert raw[0] == fake_map_bytes(q)
    assert int.from_bytes(raw[2], "little") == 0x7f0000000000   # q.aligned, after q_map


def test_failing_encode_names_the_parameter(fake, tmp_path):
    k = _kernel(fake, tmp_path)
    fake.fail["cuTensorMapEncodeTiled"] = 1
    with pytest.raises(CudaError, match=r"(?s)cuTensorMapEncodeTiled failed with CUDA error 1 "
                                        r"\(CUDA_ERROR_INVALID_VALUE\).*\(fa_fwd_d128_bf16_causal"
                                        r"_sm80: tensor map q_map of q at 0x7f0000000000: bf16, "
                                        r"dims \[128, 1000, 8, 2\]"):
        _launch.launch(k, tensors(), ENV, stream=0)
    assert fake.launches == []
    del fake.fail["cuTensorMapEncodeTiled"]
    # what the real driver refuses, the fake refuses too
    with pytest.raises(LaunchError, match="not 16-byte aligned"):
        _launch.launch(k, tensors(FakeTensor(0x7f0000000004, (B, HQ, NQ, D),
                                             contiguous_strides((B, HQ, NQ, D)))), ENV, 0)
    assert fake.encodes == [] and fake.launches == []


def test_driver_without_the_encoder(fake, tmp_path, monkeypatch):
    k = _kernel(fake, tmp_path)
    monkeypatch.delitem(_cuda.driver().fns, "cuTensorMapEncodeTiled")
    with pytest.raises(LaunchError, match="fa_fwd_d128_bf16_causal_sm80 takes a TMA tensor map "
                                          "but the CUDA driver has no cuTensorMapEncodeTiled"):
        _launch.launch(k, tensors(), ENV, stream=0)
    assert fake.launches == []


def test_load_checks_the_ptx_declaration(fake, tmp_path):
    m = manifest()
    write_kernel(str(tmp_path), m, ptx=_ptx(align=16))
    sp = M.load_manifest(str(tmp_path / (m["name"] + ".json")))
    with pytest.raises(Exception, match=r"parameter 0 \(q_map\) is a tensor map: the PTX must "
                                        r"declare it"):
        _kernels.load_kernel(sp, 0)
    assert not [e for e in fake.events if e[0] == "load"]
