"""Manifest parsing/validation and PTX signature checks (CPU only)."""

import os

import pytest

from flashmlir import _manifest as M
from flashmlir._errors import ManifestError

from conftest import FIXTURES
from helpers import DELETE, EXAMPLE, example, fake_ptx, write_kernel


def parse(m, path="<manifest>"):
    return M.parse_manifest(m, path, check_files=False)


def test_example_parses():
    s = parse(example())
    assert s.kind == "forward" and s.chip == "sm_80" and s.entry == "fa_fwd_kernel"
    assert s.dtype == "bf16" and s.head_dim == 128 and s.value_head_dim == 128
    assert s.causal and s.mask == (-1, 0)
    assert s.softcap is None
    assert s.threads == 128 and s.dynamic_shared_memory == 98304
    assert [g.text for g in s.grid] == ["ceildiv(Nq, 128)", "Hq", "B"]
    assert [p.name for p in s.params] == ["q", "k", "v", "out", "lse"]
    assert s.params[4].rank == 3 and s.params[4].dtype == "f32"
    assert s.block_q == 128 and s.block_kv == 64 and s.warps == 4 and s.stages == 2
    # 4 rank-4 memrefs (11 slots each) + 1 rank-3 memref (9 slots)
    slots = s.slots()
    assert len(slots) == 4 * 11 + 9
    assert slots[:11] == [("q.allocated", "ptr"), ("q.aligned", "ptr"), ("q.offset", "i64"),
                          ("q.sizes[0]", "i64"), ("q.sizes[1]", "i64"), ("q.sizes[2]", "i64"),
                          ("q.sizes[3]", "i64"), ("q.strides[0]", "i64"),
                          ("q.strides[1]", "i64"), ("q.strides[2]", "i64"),
                          ("q.strides[3]", "i64")]
    assert slots[-1] == ("lse.strides[2]", "i64")
    assert "causal" in s.describe()


def test_optional_fields_default():
    m = example(value_head_dim=DELETE, window=DELETE, softcap=DELETE, scale=DELETE,
                dynamic_shared_memory=DELETE, block_q=DELETE, block_kv=DELETE,
                warps=DELETE, stages=DELETE)
    s = parse(m)
    assert s.value_head_dim == 128 and s.window == (-1, -1) and s.scale is None
    assert s.resolved_scale == pytest.approx(128 ** -0.5)
    assert s.dynamic_shared_memory == 0


@pytest.mark.parametrize("overrides,match", [
    ({"version": 2}, "unsupported manifest version 2"),
    ({"version": DELETE}, "unsupported manifest version None"),
    ({"name": DELETE}, "missing field 'name'"),
    ({"name": "a b"}, "bad kernel name"),
    ({"kind": "fwd"}, "unknown kind 'fwd'"),
    ({"chip": "sm80"}, "bad chip"),
    ({"chip": "gfx90a"}, "bad chip"),
    ({"entry": "1abc"}, "bad entry name"),
    ({"entry": 3}, "field 'entry' must be str"),
    ({"dtype": "f8"}, "unsupported dtype"),
    ({"head_dim": 100}, "head_dim must be a multiple of 8"),
    ({"head_dim": 512}, "head_dim must be a multiple of 8"),
    ({"head_dim": "128"}, "must be int"),
    ({"head_dim": True}, "must be an integer"),
    ({"value_head_dim": 4}, "value_head_dim must be"),
    ({"causal": 1}, "field 'causal' must be bool"),
    ({"causal": DELETE}, "missing field 'causal'"),
    ({"window": [5]}, "window must be"),
    ({"window": [-2, 0]}, "window bounds must be >= 0"),
    ({"window": [4, 3]}, "window right bound must be 0"),
    ({"window": [1.5, 0]}, "window must be"),
    ({"softcap": 0}, "softcap must be null or a finite number > 0"),
    ({"softcap": -1.0}, "softcap must be"),
    ({"softcap": "30"}, "must be a number"),
    ({"scale": 0.0}, "scale must be"),
    ({"threads": 0}, "threads must be in"),
    ({"threads": 2048}, "threads must be in"),
    ({"dynamic_shared_memory": -1}, "dynamic_shared_memory must be >= 0"),
    ({"grid": []}, "grid must be a list of 1 to 3"),
    ({"grid": ["a", "b", "c", "d"]}, "grid must be a list of 1 to 3"),
    ({"grid": ["ceildiv(Nq, 128)", "H", "B"]}, r"grid\[1\]: unknown name\(s\) H"),
    ({"grid": ["ceildiv(Nq 128)", "Hq", "B"]}, r"grid\[0\]"),
    ({"params": []}, "params must be a non-empty list"),
    ({"ptx": "../x.ptx"}, "'ptx' must be a file name"),
])
def test_field_errors(overrides, match):
    with pytest.raises(ManifestError, match=match):
        parse(example(**overrides))


def _with_param(i, **kw):
    m = example()
    for k, v in kw.items():
        if v is DELETE:
            m["params"][i].pop(k)
        else:
            m["params"][i][k] = v
    return m


@pytest.mark.parametrize("kw,match", [
    ({"name": "k"}, "duplicate parameter name"),
    ({"name": "1q"}, "bad parameter name"),
    ({"type": "tensor"}, "unknown parameter type"),
    ({"rank": 3}, "dims must be a list of 3"),
    ({"rank": -1}, "rank must be in"),
    ({"dtype": "f8"}, "unknown dtype"),
    ({"dims": ["B", "Hq", "Nq", "E"]}, r"unknown name\(s\) E"),
    ({"rank": DELETE}, "missing field 'rank'"),
])
def test_param_errors(kw, match):
    with pytest.raises(ManifestError, match=match):
        parse(_with_param(0, **kw))


def test_scalar_params():
    m = example()
    m["params"].append({"name": "scale", "type": "f32", "value": "scale"})
    m["params"].append({"name": "n", "type": "i32", "value": 7})
    s = parse(m)
    assert s.slots()[-2:] == [("scale", "f32"), ("n", "i32")]
    m["params"].append({"name": "bad", "type": "f32"})
    with pytest.raises(ManifestError, match="needs a 'value'"):
        parse(m)


def test_dims_optional():
    m = _with_param(1, dims=DELETE)
    assert parse(m).params[1].dims is None


def test_backward_kind_allows_other_names():
    m = example(kind="backward", grid=["ceildiv(Nk, 128)", "Hq", "B"])
    m["params"][0]["dims"] = ["B", "Hq", "Nq", "D"]
    m["params"].append({"name": "dq_accum", "type": "memref", "rank": 4, "dtype": "f32",
                        "dims": ["B", "Hq", "NqRounded", "D"]})
    assert parse(m).kind == "backward"


def test_name_must_match_file(tmp_path):
    jp = write_kernel(str(tmp_path), example())
    assert M.load_manifest(jp).name == EXAMPLE["name"]
    os.rename(jp, str(tmp_path / "other.json"))
    with pytest.raises(ManifestError, match="does not match the file name 'other'"):
        M.load_manifest(str(tmp_path / "other.json"))


def test_missing_ptx(tmp_path):
    jp = write_kernel(str(tmp_path), example(), ptx=False)
    with pytest.raises(ManifestError, match="PTX file .* is missing"):
        M.load_manifest(jp)


def test_bad_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{ not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        M.load_manifest(str(p))
    p.write_text("[1, 2]")
    with pytest.raises(ManifestError, match="must be a JSON object"):
        M.load_manifest(str(p))


def test_ptx_field_shares_a_module(tmp_path):
    m = example(ptx="shared.ptx")
    (tmp_path / "shared.ptx").write_text(fake_ptx())
    jp = write_kernel(str(tmp_path), m, ptx=False)
    s = M.load_manifest(jp)
    assert s.ptx_path == str(tmp_path / "shared.ptx")


# -- chips and masks -----------------------------------------------------------

def test_chips():
    assert M.parse_chip("sm_90a") == (9, 0, True)
    assert M.parse_chip("sm_80") == (8, 0, False)
    assert M.parse_chip("sm_120") == (12, 0, False)
    assert M.chip_runs_on("sm_80", (8, 0)) and M.chip_runs_on("sm_80", (9, 0))
    assert M.chip_runs_on("sm_80", (8, 6)) and M.chip_runs_on("sm_80", (12, 0))
    assert not M.chip_runs_on("sm_80", (7, 5))
    assert M.chip_runs_on("sm_90a", (9, 0))
    assert not M.chip_runs_on("sm_90a", (10, 0)) and not M.chip_runs_on("sm_90a", (8, 0))
    assert M.chip_preference("sm_90a", (9, 0)) < M.chip_preference("sm_90", (9, 0)) \
        < M.chip_preference("sm_80", (9, 0))
    assert M.chip_preference("sm_90a", (8, 0)) is None


def test_canonical_mask():
    assert M.canonical_mask(False, None) == (-1, -1)
    assert M.canonical_mask(True, None) == (-1, 0)
    assert M.canonical_mask(True, (-1, -1)) == (-1, 0)
    assert M.canonical_mask(False, (-1, 0)) == (-1, 0)
    assert M.canonical_mask(True, (64, 0)) == (64, 0)
    assert M.canonical_mask(False, (64, 16)) == (64, 16)
    with pytest.raises(ValueError):
        M.canonical_mask(True, (64, 16))
    with pytest.raises(ValueError):
        M.canonical_mask(False, (-2, 0))


# -- PTX -------------------------------------------------------------------------

def test_parse_nvcc_ptx():
    with open(os.path.join(FIXTURES, "fixture_kernels.ptx")) as f:
        info = M.parse_ptx(f.read())
    assert info.target == "sm_80"
    assert set(info.entries) == {"probe_params", "naive_attention_f16", "naive_attention_bf16"}
    e = info.entries["naive_attention_bf16"]
    assert e.param_sizes == (8,) * 53 + (4, 4, 8, 8)
    assert e.maxntid == (128, 1, 1)
    p = info.entries["probe_params"]
    assert p.param_sizes == (8,) * 16 + (4, 4, 8)


def test_parse_llvm_ptx():
    text = fake_ptx(sizes=[8, 8, 8, 4, 2], extra=".reqntid 128, 1, 1\n")
    info = M.parse_ptx(text)
    assert info.version == "8.0" and info.target == "sm_80"
    e = info.entries["fa_fwd_kernel"]
    assert e.param_sizes == (8, 8, 8, 4, 2)
    assert e.reqntid == (128, 1, 1)


def test_parse_ptx_byval_and_comments():
    text = """
    .version 8.5
    .target sm_90a
    /* .entry fake(.param .u64 x) { */
    .visible .entry k0(
        .param .align 64 .b8 k0_param_0[128], // a tensor map
        .param .u64 k0_param_1
    )
    .maxntid 256
    {
    }
    .entry k1()
    {
    }
    """
    info = M.parse_ptx(text)
    assert set(info.entries) == {"k0", "k1"}
    assert info.entries["k0"].param_sizes == (128, 8)
    assert info.entries["k0"].maxntid == (256,)
    assert info.entries["k1"].param_sizes == ()


def _spec(**kw):
    return parse(example(**kw))


def test_check_against_ptx_ok():
    info = M.check_against_ptx(_spec(), fake_ptx(nparams=53, extra=".maxntid 128, 1, 1\n"))
    assert info.entries["fa_fwd_kernel"].param_sizes == (8,) * 53


@pytest.mark.parametrize("ptx,match", [
    (fake_ptx(nparams=52), "takes 52 parameters but the manifest's params expand to 53"),
    (fake_ptx(nparams=53, target="sm_90a"), "PTX .target is sm_90a but the manifest says chip sm_80"),
    (fake_ptx(entry="other", nparams=53), "no .entry fa_fwd_kernel"),
    (fake_ptx(sizes=[8] * 52 + [4]), r"parameter 52 \(lse.strides\[2\]\) is 8 bytes"),
    (fake_ptx(nparams=53, extra=".maxntid 64, 1, 1\n"), "exceeds the entry's .maxntid"),
    (fake_ptx(nparams=53, extra=".reqntid 256, 1, 1\n"), "differs from the entry's .reqntid"),
])
def test_check_against_ptx_errors(ptx, match):
    with pytest.raises(ManifestError, match=match):
        M.check_against_ptx(_spec(), ptx)


def test_unparseable_param():
    with pytest.raises(ManifestError, match="cannot parse PTX parameter"):
        M.parse_ptx(".entry k(\n .param .u64 .weird x y\n)\n{\n}")
