"""ListOps: evaluator, tokenizer, LRA string format, generator distribution, loader."""

from __future__ import annotations

import numpy as np
import pytest

from ssmrepro.data import DataUnavailable, load_lra
from ssmrepro.data.listops import (
    CLOSE,
    EOS,
    VOCAB,
    encode_listops,
    generate_listops,
    ids_to_tokens,
    listops_value,
    read_listops_tsv,
    to_lra_string,
    tokenize_listops,
    tokens_to_ids,
    write_listops_tsv,
)

SMALL = dict(min_length=5, max_length=60)


@pytest.mark.parametrize(
    "expr, value",
    [
        ("[MED 1 2 3 4 ]", 2),  # (2 + 3) / 2 = 2.5 -> 2
        ("[SM 9 9 ]", 8),
        ("[MIN 4 1 7 ]", 1),
        ("[MAX 0 3 ]", 3),
        ("[MED 5 1 9 ]", 5),
        ("[MED 8 9 ]", 8),
        ("[MAX 2 9 [MIN 4 7 ] 0 ]", 9),
        ("[SM [MAX 1 7 ] [MIN 8 9 ] 5 ]", 0),  # 7 + 8 + 5 = 20
        ("( ( ( [MAX 1 ) ( ( ( [MIN 2 ) 3 ) ] ) ) ] )", 2),
        ("7", 7),
    ],
)
def test_evaluator_hand_cases(expr, value):
    assert listops_value(expr) == value


@pytest.mark.parametrize("bad", ["[MAX 1 2", "[MAX ]", "1 2", "[FOO 1 ]", "[MAX 12 3 ]"])
def test_evaluator_rejects_malformed(bad):
    with pytest.raises(ValueError):
        listops_value(bad)


def test_tokenizer_matches_s4_rule():
    src = "( ( ( ( [MAX 1 ) 7 ) 2 ) ] )"
    assert tokenize_listops(src) == ["[MAX", "1", "7", "2", "X"]
    assert ids_to_tokens(encode_listops(src)) == ["[MAX", "1", "7", "2", "X"]
    assert len(VOCAB) == 17 and VOCAB[0] == "<pad>" and VOCAB[EOS] == "<eos>" and VOCAB[CLOSE] == "X"


def test_lra_string_format():
    ids = tokens_to_ids(["[MAX", "1", "[MIN", "2", "3", "X", "X"])
    assert to_lra_string(ids) == "( ( ( [MAX 1 ) ( ( ( [MIN 2 ) 3 ) ] ) ) ] )"


def test_round_trip_string_tokens_value():
    splits = generate_listops(40, 5, 5, seed=1, **SMALL)
    for split in splits.values():
        for toks, y in zip(split.tokens, split.labels):
            s = to_lra_string(toks)
            assert encode_listops(s).tobytes() == toks  # string -> tokens round trip
            assert listops_value(s) == y  # the stored label is the value of the expression
            assert s.count("(") == s.count(")")


def test_generator_deterministic_and_seed_dependent():
    a = generate_listops(30, 5, 5, seed=3, **SMALL)
    b = generate_listops(30, 5, 5, seed=3, **SMALL)
    c = generate_listops(30, 5, 5, seed=4, **SMALL)
    for s in ("train", "val", "test"):
        assert a[s].tokens == b[s].tokens and np.array_equal(a[s].labels, b[s].labels)
    assert a["train"].tokens != c["train"].tokens


def test_generator_independent_of_workers():
    a = generate_listops(40, 4, 4, seed=5, chunk_size=16, workers=1, **SMALL)
    b = generate_listops(40, 4, 4, seed=5, chunk_size=16, workers=2, **SMALL)
    assert a["train"].tokens == b["train"].tokens and a["test"].tokens == b["test"].tokens


def test_length_window_unique_and_splits():
    splits = generate_listops(300, 20, 20, seed=0, min_length=20, max_length=120)
    assert [len(splits[s]) for s in ("train", "val", "test")] == [300, 20, 20]
    all_toks = [t for s in splits.values() for t in s.tokens]
    assert len(set(all_toks)) == len(all_toks)  # de-duplicated across splits
    lengths = np.concatenate([s.lengths() for s in splits.values()])
    assert lengths.min() > 20 and lengths.max() < 120
    labels = np.concatenate([s.labels for s in splits.values()])
    assert set(np.unique(labels)) <= set(range(10)) and len(np.unique(labels)) >= 5


def test_lra_default_length_distribution():
    # LRA window 500 < len < 2000 with the LRA grammar (small sample; ~0.1 s)
    splits = generate_listops(60, 1, 1, seed=0)
    lengths = splits["train"].lengths()
    assert lengths.min() > 500 and lengths.max() < 2000
    assert 700 < lengths.mean() < 1400


def test_tsv_round_trip(tmp_path):
    splits = generate_listops(10, 1, 1, seed=2, **SMALL)
    path = tmp_path / "basic_train.tsv"
    write_listops_tsv(path, splits["train"])
    assert path.read_text().splitlines()[0] == "Source\tTarget"
    sources, labels = read_listops_tsv(path)
    assert np.array_equal(labels, splits["train"].labels)
    assert [encode_listops(s).tobytes() for s in sources] == splits["train"].tokens


def test_loader_on_release_fixture(lra_root):
    ds = load_lra("listops", "train", root=lra_root)
    assert ds.source == "lra_release" and ds.kind == "tokens" and ds.vocab_size == 17
    assert ds.n_classes == 10 and ds.x.dtype == np.uint8
    # first row is the hand-written [MAX 2 9 [MIN 4 7 ] 0 ] -> 9, followed by <eos>
    row = ds.x[0, : ds.lengths[0]]
    assert ids_to_tokens(row) == ["[MAX", "2", "9", "[MIN", "4", "7", "X", "0", "X", "<eos>"]
    assert ds.labels[0] == 9
    assert (ds.x[np.arange(len(ds)), ds.lengths - 1] == EOS).all()
    for i in range(len(ds)):  # labels agree with the evaluator
        toks = ids_to_tokens(ds.x[i, : ds.lengths[i] - 1])
        assert listops_value(toks) == ds.labels[i]


def test_loader_truncation_and_no_eos(lra_root):
    ds = load_lra("listops", "train", root=lra_root, max_len=5)
    assert ds.lengths.max() == 5 and (ds.x[:, 4] == EOS).all()
    ds = load_lra("listops", "train", root=lra_root, append_eos=False)
    assert not (ds.x == EOS).any()


def test_loader_generated_source_via_cli(empty_root):
    from typer.testing import CliRunner

    from ssmrepro.cli.data import app

    r = CliRunner().invoke(
        app,
        [
            "generate",
            "listops",
            "--n",
            "60",
            "--seed",
            "0",
            "--dir",
            str(empty_root),
            "--min-length",
            "5",
            "--max-length",
            "50",
            "--n-val",
            "5",
            "--n-test",
            "5",
        ],
    )
    assert r.exit_code == 0, r.output
    ds = load_lra("listops", "val", root=empty_root)
    assert ds.source == "generated" and len(ds) == 5
    with pytest.raises(DataUnavailable, match="ssmrepro data download lra"):
        load_lra("listops", "val", root=empty_root, accept_sources=["lra_release"])
    # refusing to overwrite without --force
    r = CliRunner().invoke(app, ["generate", "listops", "--n", "60", "--dir", str(empty_root)])
    assert r.exit_code == 2 and "--force" in r.output
