"""Roofline per operator: each FLOPs/bytes model checked by hand on real trace events, and the roofline figures of
a built trace derived by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.analyze.trace.gpu_peaks import bandwidth_tbps, lookup
from stepscope.analyze.trace.opmodels import NoModel, OpCost, op_cost
from stepscope.model.events import EventKind, EventTable
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import FIXTURES, ev, kernel, launch, write


def _event_cost(table: EventTable, name: str, dims: str) -> OpCost | NoModel:
    """The model of the first operator ``name`` whose Input Dims read as ``dims``, from the table's own columns."""
    code, shape = table.names.index(name), table.shapes.index(dims)
    for i in range(len(table)):
        if table["kind"][i] == EventKind.CPU_OP and table["name"][i] == code and table["shape"][i] == shape:
            o = int(table["optype"][i])
            types, concrete = json.loads(table.optypes[o]) if o >= 0 else (None, None)
            return op_cost(name, json.loads(dims), types, concrete)
    raise AssertionError(f"no {name} {dims}")


def _cost(c: OpCost | NoModel) -> tuple[str, float, float, str | None]:
    assert isinstance(c, OpCost), c
    return c.family, c.flops, c.bytes, c.precision


@pytest.fixture(scope="module")
def a100() -> EventTable:
    return read_trace(FIXTURES / "a100_8rank_diff" / "control_rank3.json.gz")


def test_gemm_models_on_fixture_events(a100: EventTable) -> None:
    # aten::mm [[98304,50],[50,15]] float: 2*98304*15*50 FLOPs; (98304*50 + 50*15 + 98304*15) * 4 bytes
    assert _cost(_event_cost(a100, "aten::mm", "[[98304,50],[50,15]]")) == ("gemm", 147_456_000, 25_562_040, "fp32")
    # aten::addmm [[512],[1024,1705],[1705,512]]: 2*1024*512*1705 (bias add not counted, as PyTorch's counter);
    # (512 + 1024*1705 + 1705*512 + 1024*512) * 4 = 3,143,680 * 4
    assert _cost(_event_cost(a100, "aten::addmm", "[[512],[1024,1705],[1705,512],[],[]]")) == \
        ("gemm", 1_787_822_080, 12_574_720, "fp32")
    # aten::linear [[1024,1705],[512,1705],[512]]: x (1024, 1705) by weight (512, 1705): 2*1024*512*1705, as the
    # addmm above; (1024*1705 + 512*1705 + 512 + 1024*512) * 4 = 3,143,680 * 4
    assert _cost(_event_cost(a100, "aten::linear", "[[1024,1705],[512,1705],[512]]")) == \
        ("gemm", 1_787_822_080, 12_574_720, "fp32")
    sampled = read_trace(FIXTURES / "sampled_128rank" / "rank0.json.gz")
    # aten::bmm [[2048,160,45],[2048,45,20]]: 2*2048*160*20*45; (14,745,600 + 1,843,200 + 6,553,600) * 4
    assert _cost(_event_cost(sampled, "aten::bmm", "[[2048,160,45],[2048,45,20]]")) == \
        ("gemm", 589_824_000, 92_569_600, "fp32")
    # aten::matmul [[2048,32],[32,38377]]: 2*2048*38377*32; (65,536 + 1,228,064 + 78,596,096) * 4
    assert _cost(_event_cost(sampled, "aten::matmul", "[[2048,32],[32,38377]]")) == \
        ("gemm", 5_030_150_144, 319_558_784, "fp32")
    mi250 = read_trace(FIXTURES / "mi250_1rank" / "rank0.json.gz")  # with Concrete Inputs
    # aten::addmm [[128],[5,128],[128,128]]: 2*5*128*128; (128 + 640 + 16,384 + 640) * 4
    assert _cost(_event_cost(mi250, "aten::addmm", "[[128],[5,128],[128,128],[],[]]")) == \
        ("gemm", 163_840, 71_168, "fp32")


def test_elementwise_and_norm_models_on_fixture_events(a100: EventTable) -> None:
    # native_layer_norm [[1024,512],[],[512],[512],[]] with weight: 7 FLOPs per element of 524,288;
    # input + weight + bias read (525,312 * 4), output written (524,288 * 4)
    assert _cost(_event_cost(a100, "aten::native_layer_norm", "[[1024,512],[],[512],[512],[]]")) == \
        ("normalization", 3_670_016, 4_198_400, "fp32")
    # sigmoid [[1024,512]]: one FLOP per element; read and write 524,288 floats
    assert _cost(_event_cost(a100, "aten::sigmoid", "[[1024,512]]")) == ("elementwise", 524_288, 4_194_304, "fp32")
    # add [[1024,768],[1024,768],[]]: 786,432 elements, two read and one written
    assert _cost(_event_cost(a100, "aten::add", "[[1024,768],[1024,768],[]]")) == \
        ("elementwise", 786_432, 9_437_184, "fp32")
    # copy_ [[951,1024],[951,1024],[]] of int: no FLOPs, read the source and write the destination
    assert _cost(_event_cost(a100, "aten::copy_", "[[951,1024],[951,1024],[]]")) == \
        ("elementwise", 0, 7_790_592, None)


def _cpu_profile(tmp: Path) -> EventTable:
    torch = pytest.importorskip("torch")
    f = torch.nn.functional
    from torch.profiler import ProfilerActivity, profile

    x, w, b = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4)
    q, k, v = torch.randn(2, 2, 5, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        f.conv2d(x, w, b, stride=2, padding=1)
        f.scaled_dot_product_attention(q, k, v)
    p.export_chrome_trace(str(tmp / "cpu.json"))
    return read_trace(tmp / "cpu.json")


def test_conv_and_attention_models_on_a_real_profile(tmp_path: Path) -> None:
    t = _cpu_profile(tmp_path)
    # conv2d x [2,3,8,8], w [4,3,3,3], bias [4], stride 2, padding 1 (Concrete Inputs): out = (8+2-2-1)//2+1 = 4
    # per dim -> [2,4,4,4]; 2*N*K*Ho*Wo*C*R*S = 2*2*4*16*3*9 = 6912; (384 + 108 + 4 + 128) * 4 = 2496 bytes
    conv = ("convolution", 6912, 2496, "fp32")
    assert _cost(_event_cost(t, "aten::conv2d", "[[2,3,8,8],[4,3,3,3],[4],[],[],[],[]]")) == conv
    # the oneDNN op takes padding before stride: the same figures read from its own positions
    assert _cost(_event_cost(t, "aten::mkldnn_convolution", "[[2,3,8,8],[4,3,3,3],[4],[],[],[],[]]")) == conv
    # sdpa q [2,2,5,8], k and v [2,2,6,8]: 4*B*H*L*S*D = 4*2*2*5*6*8 = 3840; (160 + 192 + 192 + 160) * 4 = 2816
    assert _cost(_event_cost(t, "aten::scaled_dot_product_attention",
                             "[[2,2,5,8],[2,2,6,8],[2,2,6,8],[],[],[],[],[]]")) == ("attention", 3840, 2816, "fp32")


def test_flops_agree_with_pytorchs_counter() -> None:
    """One definition: the GEMM, conv and attention FLOPs are those of torch.utils.flop_counter (MFU's)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    cases: list[tuple[str, Any, list[Any], list[Any], list[Any] | None]] = [
        ("aten::mm", lambda: torch.mm(torch.randn(7, 5), torch.randn(5, 3)), [[7, 5], [5, 3]], ["float"] * 2, None),
        ("aten::bmm", lambda: torch.bmm(torch.randn(2, 7, 5), torch.randn(2, 5, 3)), [[2, 7, 5], [2, 5, 3]],
         ["float"] * 2, None),
        ("aten::conv2d", lambda: torch.nn.functional.conv2d(torch.randn(1, 4, 9, 7), torch.randn(6, 2, 3, 2),
                                                            stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2),
         [[1, 4, 9, 7], [6, 2, 3, 2], [], [], [], [], []], ["float", "float", "", "", "", "", ""],
         ["", "", "", "[2, 1]", "[1, 0]", "[1, 2]", "2"]),
    ]
    for name, fn, dims, types, concrete in cases:
        with FlopCounterMode(display=False) as counter:
            fn()
        assert _cost(op_cost(name, dims, types, concrete))[1] == counter.get_total_flops(), name


def test_backward_models_on_a_real_profile_and_pytorchs_counter(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count

    x, w = torch.randn(2, 4, 9, 7, requires_grad=True), torch.randn(6, 2, 3, 2, requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    g = torch.randn_like(y)
    with FlopCounterMode(display=False) as counter:
        y.backward(g, retain_graph=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        y.backward(g)
    p.export_chrome_trace(str(tmp_path / "bw.json"))
    t = read_trace(tmp_path / "bw.json")
    # grad_out [2,6,5,5], x [2,4,9,7], w [6,2,3,2], groups 2, mask [True, True, False]: the input gradient as
    # the forward, 2*2*6*25*2*6 = 7200, the weight gradient 2 x that (PyTorch counts it over all 4 channels):
    # 21600; bytes: grad_out + x + w read (300 + 504 + 72) * 4, grad x and grad w written (504 + 72) * 4 = 5808
    cost = _cost(_event_cost(t, "aten::convolution_backward",
                             "[[2,6,5,5],[2,4,9,7],[6,2,3,2],[],[],[],[],[],[],[],[]]"))
    assert cost == ("convolution", 21600, 5808, "fp32") and cost[1] == counter.get_total_flops()
    # flash attention backward, q [2,3,5,8], k [2,3,7,8], v [2,3,7,4], grad_out [2,3,5,4]: 2*B*H*L*S*(3D + 2Dv) =
    # 2*2*3*5*7*(24 + 8) = 13440
    dims = [[2, 3, 5, 4], [2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 4]]
    sdpa = _cost(op_cost("aten::_scaled_dot_product_flash_attention_backward", dims, ["c10::BFloat16"] * 4))
    expected = sdpa_backward_flop_count(*dims)  # type: ignore[no-untyped-call]
    assert sdpa[:2] == ("attention", 13440) and sdpa[1] == expected and sdpa[3] == "bf16"
    # bytes (bf16): the four inputs read (120 + 240 + 336 + 168) * 2, dq dk dv written (240 + 336 + 168) * 2
    assert sdpa[2] == 3216


def test_shapes_without_a_model_are_listed_with_why() -> None:
    assert op_cost("aten::conv2d", [[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []], ["float"] * 7) == \
        NoModel("missing stride (no Concrete Inputs)")
    assert op_cost("aten::cumsum", [[4, 4], []], ["float", "Scalar"]) == NoModel("no model for aten::cumsum")
    assert op_cost("aten::mm", [[2, 3], [4, 5]], ["float", "float"]) == NoModel("inner dims differ")
    assert op_cost("aten::mm", [[2, 3], [3, 5]], None) == NoModel("no Input type")
    assert op_cost("aten::mm", None, None) == NoModel("no Input Dims")
    huge = [2**62] * 20  # a damaged trace: sizes past float range
    assert op_cost("aten::relu", [huge], ["float"]) == NoModel("dims or arguments out of range")
    zero_stride = ["", "", "", "[0, 0]", "[1, 1]", "[1, 1]", "1"]
    assert op_cost("aten::conv2d", [[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []], ["float"] * 7, zero_stride) \
        == NoModel("dims or arguments out of range")


def test_peak_table_finds_the_fixture_devices() -> None:
    a100 = lookup("NVIDIA A100-PG509-200", 42_297_524_224)
    assert a100 is not None and (a100.label, a100.memory_tbps, a100.matrix_tflops["bf16"]) == ("A100 40GB", 1.555, 312)
    a100_80 = lookup("NVIDIA A100-SXM4-80GB", 85_899_345_920)
    assert a100_80 is not None and a100_80.memory_tbps == 2.039
    v100 = lookup("Tesla V100-SXM2-16GB", 16_945_512_448)
    assert v100 is not None and (v100.matrix_tflops["fp16"], v100.memory_tbps) == (125, 0.9)
    h200 = lookup("NVIDIA H200", None)
    assert h200 is not None and (h200.matrix_tflops["bf16"], h200.memory_tbps) == (989.4, 4.8)
    assert lookup("AMD Radeon Graphics", 68_702_699_520) is None  # the mi250 fixture's name: not guessed
    # 1,215 MHz x 5,120 bits x 2 transfers / 8 = 1.5552 TB/s
    assert bandwidth_tbps(1_215_000, 5120) == pytest.approx(1.5552)
    assert bandwidth_tbps(None, 5120) is None


def _op(name: str, ts: float, dur: float, ext: int, dims: list[Any], types: list[str],
        concrete: list[str] | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"External id": ext, "Input Dims": dims, "Input type": types}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    return ev("cpu_op", name, ts, dur, **args)


def _roofline_trace(path: Path, device: dict[str, Any]) -> Path:
    """A100 40GB. aten::linear [0, 40) (launches nothing itself) holds aten::mm [1, 20) (bf16 4096^3, kernel
    1,000 µs); aten::add [30, 35) (1M floats, kernel 10 µs); aten::cumsum [50, 55) (kernel 5 µs, no model);
    aten::copy_ [60, 65) launching only a memcpy (not on the roofline)."""
    bf16 = ["c10::BFloat16"] * 2
    events = [
        _op("aten::linear", 0, 40, 1, [[4096, 4096], [4096, 4096], []], [*bf16, ""]),
        _op("aten::mm", 1, 19, 2, [[4096, 4096], [4096, 4096]], bf16, ["", ""]), launch(2, 1, 10, 2),
        kernel("sm90_gemm_bf16", 100, 1000, 10),
        _op("aten::add", 30, 5, 3, [[1048576], [1048576], []], ["float", "float", "Scalar"]), launch(31, 1, 11, 3),
        kernel("vectorized_elementwise_kernel", 1200, 10, 11),
        _op("aten::cumsum", 50, 5, 4, [[8, 8], []], ["float", "Scalar"]), launch(51, 1, 12, 4),
        kernel("cumsum_kernel", 1300, 5, 12),
        _op("aten::copy_", 60, 5, 5, [[64], [64], []], ["float", "float", "Scalar"]),
        ev("cuda_runtime", "cudaMemcpyAsync", 61, 1, correlation=13, **{"External id": 5}),
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 1400, 50, pid=0, tid=7, stream=7, device=0,
           correlation=13, bytes=256),
    ]
    return write(path, events, deviceProperties=[device])


A100_40 = {"id": 0, "name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224, "computeMajor": 8,
           "computeMinor": 0}


def test_roofline_of_a_built_trace_derived_by_hand(tmp_path: Path) -> None:
    r = analyze_trace(read_trace(_roofline_trace(tmp_path / "t.json", A100_40))).roofline
    assert r is not None and r.peaks is not None and r.peaks.label == "A100 40GB"
    assert (r.memory_tbps, r.memory_source) == (1.555, "table")
    assert [(o.name, o.calls, o.gpu_ns) for o in r.ops] == [("aten::mm", 1, 1_000_000), ("aten::add", 1, 10_000),
                                                            ("aten::cumsum", 1, 5_000)]  # no linear, no copy
    assert (r.gpu_ns, r.modeled_gpu_ns) == (1_015_000, 1_010_000)
    mm, add, cumsum = r.ops
    # mm: 2 * 4096^3 = 137,438,953,472 FLOPs in 1 ms = 137.44 TFLOP/s = 44.05% of 312 (bf16); 3 * 4096^2 * 2 =
    # 100,663,296 bytes = 0.1007 TB/s = 6.47% of 1.555; intensity 1365.3 > ridge 312 / 1.555 = 200.6: compute
    assert mm.flops == 137_438_953_472 and mm.bytes == 100_663_296 and mm.precision == "bf16"
    assert mm.tflops == pytest.approx(137.438953472) and mm.tbps == pytest.approx(0.100663296)
    assert mm.compute_pct == pytest.approx(44.051, abs=1e-3) and mm.memory_pct == pytest.approx(6.4735, abs=1e-3)
    assert mm.intensity == pytest.approx(1365.333, abs=1e-3) and mm.bound == "compute"
    # add: 1,048,576 FLOPs, 3 * 4 MiB = 12,582,912 bytes in 10 µs: 0.1049 TFLOP/s = 0.538% of the 19.5 FP32 vector
    # peak, 1.2583 TB/s = 80.92% of 1.555; intensity 1/12 < 19.5 / 1.555: memory
    assert add.tflops == pytest.approx(0.1048576) and add.tbps == pytest.approx(1.2582912)
    assert add.compute_pct == pytest.approx(0.53773, abs=1e-4) and add.memory_pct == pytest.approx(80.919, abs=1e-3)
    assert add.bound == "memory" and add.intensity == pytest.approx(1 / 12)
    assert cumsum.no_model == "no model for aten::cumsum" and cumsum.tflops is None and cumsum.bound is None


def test_unknown_device_gives_figures_but_no_share_of_peak(tmp_path: Path) -> None:
    r = analyze_trace(read_trace(_roofline_trace(tmp_path / "t.json", {"id": 0, "name": "Some NPU"}))).roofline
    assert r is not None and r.peaks is None and r.memory_tbps is None
    mm = r.ops[0]
    assert mm.tflops == pytest.approx(137.438953472) and mm.compute_pct is None and mm.bound is None


def test_device_properties_bandwidth_is_preferred(tmp_path: Path) -> None:
    dev = {**A100_40, "memoryClockRate": 1_215_000, "memoryBusWidth": 5120}
    r = analyze_trace(read_trace(_roofline_trace(tmp_path / "t.json", dev))).roofline
    assert r is not None and r.memory_source == "deviceProperties" and r.memory_tbps == pytest.approx(1.5552)


def test_fixture_roofline_is_finite_and_covers_its_time(a100: EventTable) -> None:
    r = analyze_trace(a100).roofline
    assert r is not None and r.ops and r.modeled_gpu_ns <= r.gpu_ns
    assert sum(o.gpu_ns for o in r.ops) == r.gpu_ns
    for o in r.ops:
        assert (o.family is None) == (o.no_model is not None)
        if o.family is not None:
            assert o.tflops is not None and o.tbps is not None and o.tflops >= 0 and o.tbps > 0
            assert o.bound in ("compute", "memory")


def test_hostile_operator_args_give_no_model_never_an_error(tmp_path: Path) -> None:
    """Values of any type where dims, types and concrete inputs belong: read, grouped, listed with why."""
    weird: list[Any] = [{"a": 1}, 7, "float", [None], [[1, 2], "x"], [True], []]
    events: list[dict[str, Any]] = []
    for i, v in enumerate(weird):
        ext, corr = 100 + i, 200 + i
        events += [ev("cpu_op", "aten::conv2d", 10 * i, 5, **{"External id": ext, "Input Dims": [[1, 1, 4, 4], v],
                                                               "Input type": v, "Concrete Inputs": v}),
                   launch(10 * i + 1, 1, corr, ext), kernel("k", 1000 + 10 * i, 2, corr)]
    table = read_trace(write(tmp_path / "t.json", events, deviceProperties=[A100_40]))
    r = analyze_trace(table).roofline
    assert r is not None and len(r.ops) == len(weird) and r.modeled_gpu_ns == 0
    assert all(o.family is None and o.no_model for o in r.ops)


def test_peaks_are_those_of_the_device_the_kernels_ran_on(tmp_path: Path) -> None:
    """deviceProperties lists the host's GPUs; the kernels ran on device 0 here, listed second (an H200)."""
    other = {"id": 1, "name": "Tesla V100-SXM2-16GB", "totalGlobalMem": 16945512448}
    ran_on = {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000}
    path = _roofline_trace(tmp_path / "t.json", other)
    import json as _json

    doc = _json.loads(path.read_text())
    doc["deviceProperties"] = [other, ran_on]
    path.write_text(_json.dumps(doc))
    r = analyze_trace(read_trace(path)).roofline
    assert r is not None and r.device == "NVIDIA H200" and r.peaks is not None and r.peaks.label == "H200 SXM"
    # mm: 137.44 TFLOP/s of the H200's 989.4 bf16 = 13.89%
    assert r.ops[0].compute_pct == pytest.approx(100 * 137.438953472 / 989.4)
