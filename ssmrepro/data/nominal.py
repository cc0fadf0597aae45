"""Library (data): the nominal facts of each LRA data source, for planning without the data.

A dry run (``ssmrepro run <id> --dry-run``) needs a dataset's shapes (sequence length, vocabulary,
classes, input channels, dual input) and split sizes to build models, size packs and count steps.
Where the data is not on this machine, ``nominal_shape(dataset, source, **preprocessing)`` gives
what the loader (``load_lra``) would produce from the source's documented contents, applying
the same preprocessing arithmetic as the loaders (truncation to ``max_len`` with ``<eos>``,
``tokenize``, ``grayscale``, ``resolution``, the seeded val / test fractions). It never reads,
downloads or generates data, and it is used for planning only: training always loads the data.

``NOMINAL`` below is the one table of these facts, one ``SourceFacts`` per (dataset, source),
each number with where it comes from. "notes §2.x" is ``notes/style-and-lra-data.md`` Part 2
(the project's research notes on LRA data). A few facts cannot be known without the data (a
character vocabulary learned with ``min_freq``, the AAN val / test sizes); they are marked, and
``NominalShape.caveats`` says so wherever such a value is used.

Example::

    s = nominal_shape("listops", "lra_release")            # default preprocessing (max_len 2048)
    s.seq_len, s.vocab_size, s.n_classes, s.sizes          # 2000, 17, 10, {'train': 96000, ...}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from . import listops, text
from .sources import CIFAR10, DIGITS, FASHION_MNIST32, GENERATED, IMDB, LRA_RELEASE

Kind = Literal["tokens", "pixels"]


@dataclass(frozen=True)
class SourceFacts:
    """What one data source holds, before our preprocessing.

    rows     examples as the source ships them: {"train", "val", "test"} when it has three fixed
             splits, {"train", "test"} when val is carved from train by the loader, {"all"} when
             the loader splits one pool
    longest  the longest raw input in tokens (before ``<eos>`` and truncation); pixel sources:
             the side of the square image
    vocab    token sources whose vocabulary is learned from the data: its size at the loader's
             default ``min_freq`` (None: the vocabulary is fixed in code, or pixels)
    guessed  facts here that are not documented exactly (said in the dry run's output)
    """

    rows: dict[str, int]
    longest: int
    vocab: int | None = None
    guessed: tuple[str, ...] = ()


# ListOps: LRA keeps a tree iff 500 < length < 2000 tokens (notes §2.4; listops.py docstring), so
# the longest is 1999 tokens; our generator at full scale (100k trees) measured 1999 as well.
_LISTOPS_LONGEST = 1999

NOMINAL: dict[tuple[str, str], SourceFacts] = {
    # notes §2.2 "Splits": 96,000 / 2,000 / 2,000 (listops-1000/basic_*.tsv)
    ("listops", LRA_RELEASE): SourceFacts({"train": 96_000, "val": 2_000, "test": 2_000},
                                          _LISTOPS_LONGEST),
    # `ssmrepro data generate listops` defaults: --n 100000, val and test 2% each (cli/data.py)
    ("listops", GENERATED): SourceFacts({"train": 96_000, "val": 2_000, "test": 2_000},
                                        _LISTOPS_LONGEST),
    # notes §2.2 and text.py: 25k train / 25k test reviews (val = test unless val_split="train").
    # longest: IMDB reviews run far past the 4,096-character cap (about 13.7k characters; not in
    # the notes, but any value above max_len gives the same width: every width is max_len).
    # vocab: notes §2.2, S4 "char level min_freq=15: vocab ~ 135" (approximate).
    ("text", IMDB): SourceFacts({"train": 25_000, "test": 25_000}, 13_704, vocab=135,
                                guessed=("vocabulary assumed 135 (S4 reports ~135 at min_freq "
                                         "15)",)),
    # notes §2.2: 147,086 training pairs (S4 config); the eval / test sizes are "not checked" in
    # the notes: 18,090 / 17,437 are the counts usually quoted for new_aan_pairs.{eval,test}.tsv,
    # unverified here. longest: AAN papers are full texts, far past the 4,000-character cap per
    # document (not in the notes; any value above max_len gives the same width).
    # vocab: notes §2.2, S4 "Full size 98" (min_freq 1, our default).
    ("retrieval", LRA_RELEASE): SourceFacts({"train": 147_086, "val": 18_090, "test": 17_437},
                                            100_000, vocab=98,
                                            guessed=("val / test sizes assumed 18,090 / 17,437 "
                                                     "(not checked)", "vocabulary assumed 98 (S4 "
                                                     "reports 98 at min_freq 1)")),
    # CIFAR-10: 50,000 train + 10,000 test images of 32x32 (notes §2.2: 45k / 5k / 10k after the
    # 10% val split)
    ("image", CIFAR10): SourceFacts({"train": 50_000, "test": 10_000}, 32),
    # Fashion-MNIST: 60,000 train + 10,000 test, 28x28 zero-padded to 32x32 (image.py; notes §2.6)
    ("image", FASHION_MNIST32): SourceFacts({"train": 60_000, "test": 10_000}, 32),
    # scikit-learn digits: one pool of 1,797 8x8 images (image.py docstring)
    ("image", DIGITS): SourceFacts({"all": 1_797}, 8),
    # Pathfinder: 200k images per difficulty folder (notes §2.2, split 160k / 20k / 20k by the
    # seeded fractions); generated: `ssmrepro data generate pathfinder` default --n 200000
    ("pathfinder", LRA_RELEASE): SourceFacts({"all": 200_000}, 32),
    ("pathfinder", GENERATED): SourceFacts({"all": 200_000}, 32),
    # Path-X: pathfinder128, "as Pathfinder" (notes §2.2)
    ("pathx", LRA_RELEASE): SourceFacts({"all": 200_000}, 128),
    ("pathx", GENERATED): SourceFacts({"all": 200_000}, 128),
}


@dataclass(frozen=True)
class NominalShape:
    """What ``load_lra`` would give for one (dataset, source, preprocessing): the ``LRADataset``
    attributes a task reads (``seq_len`` is the padded width of every split)."""

    dataset: str
    source: str
    sizes: dict[str, int]  # train / val / test rows
    seq_len: int
    kind: Kind
    vocab_size: int | None  # token inputs
    d_input: int | None  # pixel inputs: channels
    n_classes: int
    dual: bool = False
    caveats: tuple[str, ...] = ()

    def describe(self) -> str:
        what = (f"vocab {self.vocab_size}" if self.kind == "tokens" else f"{self.d_input} channel"
                + ("s" if self.d_input != 1 else ""))
        sizes = " / ".join(f"{n:,}" for n in self.sizes.values())
        dual = ", two documents" if self.dual else ""
        return f"L {self.seq_len:,}{dual}, {what}, {self.n_classes} classes, {sizes} rows"


def _split_off(n: int, fraction: float) -> tuple[int, int]:
    """(rest, carved) as ``image.split_train_val`` cuts n rows: carved = int(fraction * n)."""
    carved = int(fraction * n)
    return n - carved, carved


def _token_width(longest: int, cfg: Any) -> int:
    """Padded width of token rows: the longest row, truncated so that with ``<eos>`` it is at most
    ``max_len`` (listops / text / retrieval ``encode_*``)."""
    keep = cfg.max_len - 1 if cfg.append_eos else cfg.max_len
    return min(longest, keep) + (1 if cfg.append_eos else 0)


def nominal_shape(dataset: str, source: str, **preprocessing: Any) -> NominalShape:
    """The nominal ``NominalShape`` of ``dataset`` from ``source`` under ``preprocessing`` (the
    fields of the dataset's config; unknown names raise ValueError, as in ``load_lra``)."""
    from .datasets import DATASETS, dataset_config

    cfg = dataset_config(dataset, **preprocessing)
    facts = NOMINAL.get((dataset, source))
    if facts is None:
        raise ValueError(f"no nominal facts for dataset {dataset!r} from source {source!r}")
    n_classes = DATASETS[dataset].n_classes
    caveats = list(facts.guessed)
    rows = facts.rows
    if dataset == "listops":
        return NominalShape(dataset, source, dict(rows), _token_width(facts.longest, cfg),
                            "tokens", listops.VOCAB_SIZE, None, n_classes)
    if dataset == "text":
        if cfg.val_split == "train":
            train, val = _split_off(rows["train"], cfg.val_fraction)
        else:
            train, val = rows["train"], rows["test"]
        sizes = {"train": train, "val": val, "test": rows["test"]}
        if cfg.level == "byte":  # fixed in code: <pad>, <eos> + 256 bytes
            vocab, caveats = len(text.BYTE_VOCAB), []
        else:
            vocab = facts.vocab or 0
            if cfg.min_freq != 15:
                caveats.append(f"min_freq {cfg.min_freq}: its vocabulary size cannot be known "
                               "without the data, the size at min_freq 15 is used")
        return NominalShape(dataset, source, sizes, _token_width(facts.longest, cfg), "tokens",
                            vocab, None, n_classes, caveats=tuple(caveats))
    if dataset == "retrieval":
        if cfg.min_freq != 1:
            caveats.append(f"min_freq {cfg.min_freq}: its vocabulary size cannot be known without "
                           "the data, the size at min_freq 1 is used")
        return NominalShape(dataset, source, dict(rows), _token_width(facts.longest, cfg),
                            "tokens", facts.vocab, None, n_classes, dual=True,
                            caveats=tuple(caveats))
    if dataset == "image":
        if "all" in rows:  # digits: test first, then val, then train (image.prepare_digits)
            n = rows["all"]
            n_test = int(0.2 * n)  # image.DIGITS_TEST_FRACTION
            n_val = int(cfg.val_fraction * n)
            sizes = {"train": n - n_test - n_val, "val": n_val, "test": n_test}
        else:
            train, val = _split_off(rows["train"], cfg.val_fraction)
            sizes = {"train": train, "val": val, "test": rows["test"]}
        channels = 1 if cfg.grayscale or source != CIFAR10 else 3
        return _pixels(dataset, source, sizes, facts.longest, channels, cfg, n_classes, caveats)
    if dataset in ("pathfinder", "pathx"):  # datasets._pf_prepare
        n = rows["all"]
        n_val, n_test = int(cfg.val_fraction * n), int(cfg.test_fraction * n)
        sizes = {"train": n - n_val - n_test, "val": n_val, "test": n_test}
        side = cfg.resolution
        if side != facts.longest:
            caveats.append(f"resolution {side}: split sizes assumed those of the "
                           f"{facts.longest}x{facts.longest} folder")
        return _pixels(dataset, source, sizes, side, 1, cfg, n_classes, caveats)
    raise ValueError(f"no nominal shape rule for dataset {dataset!r}")


def _pixels(dataset: str, source: str, sizes: dict[str, int], side: int, channels: int, cfg: Any,
            n_classes: int, caveats: list[str]) -> NominalShape:
    """Pixel rows are H x W long; ``tokenize`` turns them into 256 gray-level tokens
    (``datasets._build``)."""
    if getattr(cfg, "tokenize", False):
        return NominalShape(dataset, source, sizes, side * side, "tokens", 256, None, n_classes,
                            caveats=tuple(caveats))
    return NominalShape(dataset, source, sizes, side * side, "pixels", None, channels, n_classes,
                        caveats=tuple(caveats))
