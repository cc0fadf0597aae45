"""A dry run prices a run whose training batch does not fit this machine's memory (a paper
profile's LRA batch on a CPU; issue 15) by extrapolating its step time from smaller batches that
do fit, and says so; training it here still refuses, and every other memory problem (the
parameters, an evaluation batch, one sequence too large) still refuses in the dry run too."""

from __future__ import annotations

import importlib

import pytest
from helpers import write_spec
from typer.testing import CliRunner

from ssmrepro.cli import app
from ssmrepro.engine.plan import MAX_TIMED_BATCH, TIMING_SHARE, extrapolate, fitting_batch, split_by_memory
from ssmrepro.spec import load_spec
from ssmrepro.sweep import expand
from ssmrepro.train import memory_need

runner = CliRunner()
train_mod = importlib.import_module("ssmrepro.train")
engine_mod = importlib.import_module("ssmrepro.engine")
plan_mod = importlib.import_module("ssmrepro.engine.plan")


def _spec(tmp_path, batch: int = 32):
    return write_spec(tmp_path, train={"optimizer": "adam", "lr": 0.01, "batch_size": batch,
                                       "max_steps": 40, "val_size": 8, "test_size": 8,
                                       "eval_every": 20, "eval_batch_size": 2},
                      sweep=[{"cases": [{"label": "S6", "set": {"model.mixer": "s6"}}]}],
                      seeds=[0, 1])


def _runs(tmp_path, batch: int = 32):
    return expand(load_spec(_spec(tmp_path, batch)), "smoke")


class _NoRise:
    """PeakRSS stand-in: the timed step (a fake) allocates nothing."""

    bytes = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


@pytest.fixture(autouse=True)
def _quiet_rss(monkeypatch, request):
    if "real_rss" not in request.keywords:
        monkeypatch.setattr(plan_mod, "PeakRSS", _NoRise)


def _squeeze(monkeypatch, available: int) -> None:
    """This machine has ``available`` bytes, for every reader of the figure."""
    for mod in (train_mod, plan_mod, engine_mod):
        monkeypatch.setattr(mod, "available_memory", lambda device, a=available: a)


def test_the_fitting_batch_is_the_largest_that_fits(tmp_path):
    run = _runs(tmp_path)[0]
    need = memory_need(run)
    per_seq = need.train_bytes // 32
    assert need.train_bytes == 32 * per_seq  # activations are linear in the batch
    room = need.param_bytes + 10 * per_seq
    assert fitting_batch(run, room) == 10
    assert fitting_batch(run, room - 1) == 9
    assert fitting_batch(run, need.total * 100) == 31  # never the run's own batch
    assert fitting_batch(run, need.param_bytes) == 0  # the parameters alone fill it
    assert fitting_batch(run, need.param_bytes + per_seq - 1) == 0  # not even one sequence


@pytest.mark.parametrize("a,c,how", [(0.5, 0.25, "affine"), (0.0, 0.1, "affine"),
                                     (2.0, 0.0, "proportional"), (3.0, -0.01, "proportional")])
def test_the_step_time_is_read_off_the_line_through_two_timed_batches(tmp_path, monkeypatch,
                                                                       a, c, how):
    runs = _runs(tmp_path)
    timed = []

    def fake(rs, device, n_steps=3, micro_batch=None):
        b = rs[0].train.batch_size
        timed.append(b)
        return a + c * b

    monkeypatch.setattr(train_mod, "time_steps", fake)
    need = memory_need(runs[0])
    per_seq = need.train_bytes // 32
    avail = int((need.param_bytes + 3 * per_seq) / TIMING_SHARE) + 1
    o = extrapolate(runs, "cpu", avail)
    assert timed == [1, 3] and o.batches == (1, 3) and o.how == how
    want = a + c * 32 if how == "affine" else (a + c * 3) * 32 / 3
    assert o.step_s == pytest.approx(want, rel=1e-12)
    assert "extrapolated to batch 32" in o.line() and "training here refuses" in o.line()
    o.available = o.need  # fits, only over the timing share
    assert "timed small" in o.line() and "refuses" not in o.line()


def test_the_timed_batch_is_capped(tmp_path, monkeypatch):
    runs = _runs(tmp_path)
    monkeypatch.setattr(train_mod, "time_steps",
                        lambda rs, d, n=1, micro_batch=None: 0.1 * rs[0].train.batch_size)
    need = memory_need(runs[0])
    o = extrapolate(runs, "cpu", need.total * 10)  # a batch of 31 would fit
    assert o.batches == (MAX_TIMED_BATCH // 2, MAX_TIMED_BATCH)
    assert o.step_s == pytest.approx(3.2) and o.how == "affine"


def test_one_timed_batch_scales_proportionally(tmp_path, monkeypatch):
    runs = _runs(tmp_path)
    monkeypatch.setattr(train_mod, "time_steps", lambda rs, d, n=3, micro_batch=None: 0.3)
    need = memory_need(runs[0])
    per_seq = need.train_bytes // 32
    o = extrapolate(runs, "cpu", int((need.param_bytes + per_seq) / TIMING_SHARE) + 1)
    assert o.batches == (1,) and o.how == "proportional" and o.step_s == pytest.approx(0.3 * 32)


def test_only_a_training_batch_too_large_is_extrapolated(tmp_path):
    runs = _runs(tmp_path)
    need = memory_need(runs[0])
    fit, over, untimed, refused = split_by_memory(runs, "cpu", True, available=4 * need.total)
    assert (len(fit), over, untimed, refused) == (2, [], [], [])
    fit, over, untimed, refused = split_by_memory(runs, "cpu", True, available=need.total)
    assert fit == [] and [len(g) for g in over] == [2]  # fits, but over the timing share
    fit, over, untimed, refused = split_by_memory(runs, "cpu", False, available=need.total)
    assert len(fit) == 2 and over == []  # no estimate: nothing is timed
    tight = need.total - 1  # the batch of 32 misses by a byte; half of it fits in the share
    fit, over, untimed, refused = split_by_memory(runs, "cpu", True, available=tight)
    assert fit == [] and [len(g) for g in over] == [2] and untimed == refused == []  # one shape
    fit, over, untimed, refused = split_by_memory(runs, "cpu", False, available=tight)
    assert over == untimed == [] and len(refused) == 1 and "train.batch_size" in refused[0]
    fit, over, untimed, refused = split_by_memory(runs, "cpu", True, available=need.param_bytes)
    assert over == untimed == [] and len(refused) == 1  # the parameters fill it: refused
    # batch 1 does not fit: nothing smaller to time (T 16: its activations, not its
    # parameters, are the larger part of the estimate; an evaluation batch of 1, smaller than
    # the training step: the evaluation batch of 2 holds more than a training step of 1)
    one = expand(load_spec(_spec(tmp_path, 1)), "smoke", {"task.T": 16,
                                                          "train.eval_batch_size": 1})
    need1 = memory_need(one[0])
    fit, over, untimed, refused = split_by_memory(one, "cpu", True, available=need1.total - 1)
    assert fit == over == refused == [] and len(untimed) == 1
    assert len(untimed[0][0]) == 2 and "not timed, left out of the estimate" in untimed[0][1]


def test_dry_run_prices_an_oversized_run_and_training_still_refuses(tmp_path, monkeypatch):
    spec, out = _spec(tmp_path), tmp_path / "out"
    monkeypatch.setenv("SSMREPRO_CACHE", str(tmp_path / "cost-cache"))
    run = _runs(tmp_path)[0]
    _squeeze(monkeypatch, memory_need(run).total - 1)
    res = runner.invoke(app, ["run", str(spec), "--out", str(out), "--profile", "smoke",
                              "--dry-run"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert text.count("does not fit here:") == 1, text
    assert "2 runs too large to time at their batch size" in text and "estimated wall-clock" in text
    assert "extrapolated to batch 32" in text

    res = runner.invoke(app, ["run", str(spec), "--out", str(out), "--profile", "smoke",
                              "--dry-run", "--no-estimate"])
    assert res.exit_code == 2 and "needs about" in res.output  # nothing priced: refused
    res = runner.invoke(app, ["run", str(spec), "--out", str(out), "--profile", "smoke",
                              "--no-calibrate", "--no-plot"])
    assert res.exit_code == 2 and "needs about" in res.output  # training refuses as before
    assert not list(out.rglob("*.json"))


def test_a_dry_run_leaves_out_what_it_cannot_time_and_says_so(tmp_path, monkeypatch):
    """Two shapes: T = 8 fits, T = 128 does not even at its batch of 1. The estimate covers the
    first and says it is a lower bound; with only the second the dry run refuses."""
    monkeypatch.setenv("SSMREPRO_CACHE", str(tmp_path / "cost-cache"))
    train = {"optimizer": "adam", "lr": 0.01, "batch_size": 1, "max_steps": 40, "val_size": 8,
             "test_size": 8, "eval_every": 20, "eval_batch_size": 1}
    cases = [{"label": "short", "set": {"task.T": 8}}, {"label": "long", "set": {"task.T": 128}}]
    spec = write_spec(tmp_path, train=train, sweep=[{"cases": cases}], seeds=[0])
    short, long_ = expand(load_spec(spec), "smoke")
    assert memory_need(short).total < memory_need(long_).total
    _squeeze(monkeypatch, memory_need(long_).total - 1)
    res = runner.invoke(app, ["run", str(spec), "--out", str(tmp_path / "o"), "--profile",
                              "smoke", "--dry-run"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert text.count("not timed:") == 1 and "run long (1 run)" in text, text
    assert "at least (the 1 of 2 pending runs that could be timed)" in text, text
    res = runner.invoke(app, ["run", str(spec), "--out", str(tmp_path / "o"), "--profile",
                              "smoke", "--dry-run", "--json"])
    assert res.exit_code == 0 and '"untimed_runs": 1' in res.output, res.output
    only = write_spec(tmp_path, name="t-only", train=train, sweep=[{"cases": cases[1:]}],
                      seeds=[0])
    res = runner.invoke(app, ["run", str(only), "--out", str(tmp_path / "o"), "--profile",
                              "smoke", "--dry-run"])
    assert res.exit_code == 2 and "needs about" in res.output  # nothing could be priced


def _saved_bytes(module, x) -> int:
    """Bytes of the distinct storages autograd keeps for backward of ``module(x)``."""
    import torch

    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(x)
    return sum(seen.values())


@pytest.mark.parametrize("d,N,L", [(8, 4, 64), (16, 8, 128), (32, 16, 300)])
def test_the_s4d_kernel_is_counted_once_per_member_not_per_sequence(d, N, L):
    """S4D's FFT path builds a (d, N, L) complex Vandermonde kernel per step whatever the batch:
    the per-sample estimate alone put yu2025-tab2's ListOps S4D at 0.2 GB where a batch of one
    measured 1.6 GB. Saved-for-backward bytes at batch 1 and 2 give the batch-independent part;
    the estimate bounds it from above within 2x."""
    import torch

    from ssmrepro.models.mixers import MIXERS, parse_mixer

    cfg = parse_mixer({"name": "s4d_zoh", "d_state": N})
    mixer = MIXERS["s4d_zoh"].build(cfg, 1, d)
    one, two = (_saved_bytes(mixer, torch.randn(1, b, L, d, requires_grad=True)) for b in (1, 2))
    fixed = one - (two - one)
    assert fixed <= 4 * cfg.fixed_floats(d, L) <= 2 * fixed
    assert parse_mixer({"name": "s4d_zoh", "d_state": N, "impl": "scan"}).fixed_floats(d, L) == 0


def _s4d_runs(tmp_path):
    """Two bidirectional S4D (FFT-kernel) layers, d 8, N 4, batch 8: a step with fixed buffers."""
    spec = write_spec(tmp_path, model={"name": "seq_lm", "d_model": 8, "layers": "S", "repeat": 2,
                                       "blocks": {"S": {"mixer": {"name": "s4d_zoh", "d_state": 4},
                                                        "bidirectional": "sum"}}},
                      train={"optimizer": "adam", "lr": 0.01, "batch_size": 8, "max_steps": 4,
                             "val_size": 2, "test_size": 2, "eval_every": 2,
                             "eval_batch_size": 1},
                      sweep=[], seeds=[0])
    return expand(load_spec(spec), "smoke")


def test_the_batch_independent_part_is_in_the_need_and_not_scaled(tmp_path):
    run = _s4d_runs(tmp_path)[0]
    need = memory_need(run)
    T = run.task.T
    assert need.fixed_bytes == 4 * 2 * 2 * 4 * 8 * 4 * T  # bytes x layers x directions x 4dNL
    assert 0 < need.fixed_bytes < need.train_bytes
    per_seq = (need.train_bytes - need.fixed_bytes) // run.train.batch_size
    assert fitting_batch(run, need.param_bytes + need.fixed_bytes + 3 * per_seq) == 3
    assert fitting_batch(run, need.param_bytes + 3 * per_seq) < 3  # without room for the kernel


def test_a_measured_rise_above_the_estimate_shrinks_the_second_batch(tmp_path, monkeypatch):
    """The estimate allowed batch 4 (timed after 2), but batch 2 measured 3x what the estimate
    said it takes: batch 4 is not timed, the second point is batch 1 (a line through 1 and 2,
    so a large fixed cost per step is not scaled with the batch)."""
    runs = _runs(tmp_path)
    need = memory_need(runs[0])
    per_seq = need.train_bytes // 32
    avail = int((need.param_bytes + 4 * per_seq) / TIMING_SHARE) + 1

    class Rise(_NoRise):
        bytes = 3 * (need.param_bytes + 2 * per_seq)

    monkeypatch.setattr(plan_mod, "PeakRSS", Rise)
    timed = []

    def fake(rs, d, n=1, micro_batch=None):  # 5 s fixed + 0.1 s per sequence (S4D-like)
        timed.append(rs[0].train.batch_size)
        return 5.0 + 0.1 * rs[0].train.batch_size

    monkeypatch.setattr(train_mod, "time_steps", fake)
    o = extrapolate(runs, "cpu", avail)
    assert timed == [2, 1] and o.batches == (1, 2) and o.how == "affine"
    assert o.step_s == pytest.approx(5.0 + 0.1 * 32)  # not (5.2 / 2) * 32 = 83.2
    Rise.bytes = 0  # as estimated: both points
    assert extrapolate(runs, "cpu", avail).batches == (2, 4)


@pytest.mark.real_rss
def test_peak_rss_sees_an_allocation():
    import torch

    with plan_mod.PeakRSS() as peak:
        x = torch.ones(64 << 20, dtype=torch.uint8)  # 64 MB, touched
        x.add_(1)
        del x
    assert peak.bytes >= 32 << 20


@pytest.mark.real_rss
def test_released_memory_leaves_the_process():
    """After tune_malloc the heap is never trimmed; release_memory gives free pages back."""
    import torch

    from ssmrepro.util import release_memory, tune_malloc

    if not tune_malloc():
        pytest.skip("not glibc")
    x = torch.ones(256 << 20, dtype=torch.uint8)
    x.add_(1)
    before = plan_mod.PeakRSS._rss()
    del x
    assert release_memory()
    assert plan_mod.PeakRSS._rss() < before - (128 << 20)


def test_an_untimed_run_names_the_fixed_buffers_it_needs_besides_one_sequence(tmp_path):
    """Path-X / S4D: one sequence needs less than the timing share, the kernels on top of it do
    not fit; the line says both (it read '1.4 GB, more than the 12.1 GB' before)."""
    runs = _s4d_runs(tmp_path)
    need = memory_need(runs[0])
    per_seq = (need.train_bytes - need.fixed_bytes) // 8
    # room for the parameters, the evaluation batch and one sequence, but not the kernels too
    avail = int((need.param_bytes + per_seq + need.fixed_bytes // 2) / TIMING_SHARE)
    assert need.param_bytes + need.eval_bytes < avail
    fit, over, untimed, refused = split_by_memory(runs, "cpu", True, available=avail)
    assert fit == over == refused == [] and len(untimed) == 1, (fit, over, refused)
    assert "on top of" in untimed[0][1] and "per-step buffers" in untimed[0][1]
