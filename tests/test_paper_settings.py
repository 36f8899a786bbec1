"""The paper's settings (uldp.paper.settings), checked whole against settings.md, whose tables are parsed here
independently of the module; and RunConfig's defaults, which must be that table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from uldp import defaults
from uldp.data import DATASETS
from uldp.defaults import DATASET_DEFAULTS
from uldp.paper import settings as paper_settings
from uldp.paper.settings import PRIVACY_UTILITY, PROTOCOL_RUNTIME, USER_SAMPLING, WEIGHTING
from uldp.simulation import RunConfig

SETTINGS_MD = Path(__file__).resolve().parent.parent.parent / "shared" / "paper" / "settings.md"
NAMES = {
    "Creditcard": "creditcard",
    "MNIST": "mnist",
    "HeartDisease": "heart_disease",
    "TcgaBrca": "tcga_brca",
}

pytestmark = pytest.mark.skipif(
    not SETTINGS_MD.exists(),
    reason=f"the paper's settings.md is not at {SETTINGS_MD} (../shared/paper/ beside the "
    "repository), so the table cannot be checked against it",
)


def _text() -> str:
    return SETTINGS_MD.read_text(encoding="utf-8")


def _table(heading: str) -> list[list[str]]:
    """Rows (cells stripped, header and rule dropped) of the first markdown table after ``heading``."""
    text = _text()
    block = []
    for line in text[text.index(heading) :].splitlines()[1:]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif block:
            break
    assert len(block) > 2, heading
    return block[2:]


def _methods(cell: str) -> list[str]:
    """``"ULDP-NAIVE, ULDP-GROUP-{max, 2}"`` -> ``["ULDP-NAIVE", "ULDP-GROUP-max", "ULDP-GROUP-2"]``."""
    expanded = re.sub(
        r"(\S+)-\{([^}]*)\}",
        lambda m: ", ".join(f"{m[1]}-{x.strip()}" for x in m[2].split(",")),
        cell,
    )
    return [name.strip() for name in expanded.split(",")]


def _family(method: str) -> str:
    """The row a method shares (every GROUP-k one row; a ``-w`` variant its family's), read from the name alone."""
    return "ULDP-GROUP" if method.startswith("ULDP-GROUP-") else method.removesuffix("-w")


def _number(cell: str) -> float | None:
    return None if cell == "-" else float(cell)


def _search(pattern: str, text: str) -> re.Match[str]:
    """``re.search``, failing the test where the text has nothing matching ``pattern``."""
    match = re.search(pattern, text)
    assert match is not None, f"settings.md has nothing matching {pattern!r}"
    return match


def _numbers(cell: str) -> tuple[float, ...]:
    return tuple(float(part) for part in cell.split(","))


def test_shared_settings_are_those_of_settings_md():
    text = _text()
    sigma, delta, seeds = _search(
        r"noise multiplier sigma = ([\d.]+), delta = ([\de.-]+), (\d+) repetitions", text
    ).groups()
    assert (float(sigma), float(delta)) == (defaults.SIGMA, defaults.DELTA)
    assert tuple(range(int(seeds))) == paper_settings.PAPER_SEEDS
    silos = _search(
        r"Creditcard and MNIST (\d+) silos; HeartDisease (\d+), TcgaBrca (\d+)", text
    ).groups()
    batch = _search(
        r"Local batch size (\d+) \(Creditcard, MNIST\), (\d+) \(HeartDisease\), (\d+) \(TcgaBrca\)",
        text,
    ).groups()
    for names, n_silos, batch_size in zip(
        (("creditcard", "mnist"), ("heart_disease",), ("tcga_brca",)),
        silos[:1] + silos[1:2] + silos[2:],
        batch,
        strict=True,
    ):
        for name in names:
            row = DATASET_DEFAULTS[name]
            assert (row.n_silos, row.batch_size) == (int(n_silos), int(batch_size)), name
            assert DATASETS[name].default_silos == int(
                n_silos
            )  # the data registry reads the same table
    assert "`uniform/uniform` and `zipf/zipf` (iid); MNIST also `zipf-noniid/zipf`" in text
    for name, settings in PRIVACY_UTILITY.items():
        extra = ("zipf-noniid",) if name == "mnist" else ()
        assert settings.distributions == ("uniform", "zipf", *extra)
    synthetic = _search(r"Artificial: .*?(\d+) users, (\d+) silos", text).groups()
    synthetic_row = DATASET_DEFAULTS["synthetic"]
    assert (synthetic_row.users, synthetic_row.n_silos) == ((int(synthetic[0]),), int(synthetic[1]))


def _privacy_utility_rows() -> dict[tuple[str, str, int], dict]:
    """Per dataset, method family and user count: rounds and the run arguments the table gives."""
    expected: dict[tuple[str, str, int], dict] = {}
    dataset = users = rounds = None
    for row in _table("## Privacy-utility figures"):
        if row[0]:
            dataset, users, rounds = (
                NAMES[row[0]],
                tuple(int(u) for u in row[1].split(",")),
                int(row[2]),
            )
        assert dataset is not None and users is not None, "the table's first row names its dataset"
        by_users = {
            int(count): float(lr) for lr, count in re.findall(r"([\d.]+) \((\d+) users\)", row[4])
        }
        for method in _methods(row[3]):
            for n_users in users:
                expected[(dataset, _family(method), n_users)] = {
                    "users": users,
                    "rounds": rounds,
                    "global_lr": by_users.get(n_users, float(row[4].split()[0])),
                    "clip": _number(row[5]),
                    "local_lr": _number(row[6]),
                    "local_epochs": None if row[7] == "-" else int(row[7]),
                }
    # The sentence under the table: ULDP-NAIVE on MNIST at the Creditcard shape with C = 1.0.
    shape = _search(
        r"global lr ([\d.]+), C ([\d.]+), local lr ([\d.]+), Q (\d+)\)", _text()
    ).groups()
    for n_users in (100, 10000):
        expected[("mnist", "ULDP-NAIVE", n_users)] = {
            "users": (100, 10000),
            "rounds": 200,
            "global_lr": float(shape[0]),
            "clip": float(shape[1]),
            "local_lr": float(shape[2]),
            "local_epochs": int(shape[3]),
        }
    return expected


def test_privacy_utility_table_is_settings_md_row_for_row():
    expected = _privacy_utility_rows()
    got = {
        (name, family, n_users)
        for name, settings in PRIVACY_UTILITY.items()
        for family in settings.families
        for n_users in settings.users
    }
    assert got == set(expected)
    for (name, family, n_users), want in expected.items():
        settings = PRIVACY_UTILITY[name]
        assert (settings.users, settings.rounds) == (want["users"], want["rounds"]), name
        assert settings.hyper(family).params(n_users) == {
            key: want[key] for key in ("global_lr", "clip", "local_lr", "local_epochs")
        }
    assert set(paper_settings.PRIVACY_UTILITY_METHODS) == {
        method for row in _table("## Privacy-utility figures") for method in _methods(row[3])
    }


def test_mnist_global_learning_rate_is_100_only_for_the_10000_users_of_settings_md():
    """settings.md: "10.0 (100 users), 100.0 (10000 users)". The table is read as it is written, per user count; a
    count it does not list takes the row's first value."""
    assert "| 10.0 (100 users), 100.0 (10000 users) |" in _text()
    avg = DATASET_DEFAULTS["mnist"].hyper("ULDP-AVG")
    counts = (1, 100, 1000, 9999, 10000, 10001, 20000, 60000)
    assert [avg.params(n)["global_lr"] for n in counts] == [
        100.0 if n == 10000 else 10.0 for n in counts
    ]


@pytest.mark.parametrize(
    "heading, figure",
    [
        ("## Enhanced weighting figure", WEIGHTING),
        ("## User-level sub-sampling figure", USER_SAMPLING),
    ],
)
def test_weighting_and_user_sampling_tables_are_settings_md(heading, figure):
    rows = _table(heading)
    assert len(rows) == len(figure)
    distributions: tuple[str, ...]
    q: tuple[float, ...]
    methods: tuple[str, ...]
    for row, settings in zip(rows, figure, strict=True):
        if heading.startswith("## Enhanced"):
            silos, distributions, q, rest = (
                row[2],
                tuple(d.strip() for d in row[3].split(",")),
                (1.0,),
                row[4:],
            )
            methods = ("ULDP-AVG", "ULDP-AVG-w")
        else:
            assert row[2] == "zipf/zipf"
            silos = str(DATASET_DEFAULTS[settings.dataset].n_silos)
            distributions, q, rest = ("zipf",), _numbers(row[3]), row[4:]
            methods = ("ULDP-AVG-w",)
        assert (settings.dataset, settings.users) == (NAMES[row[0]], (int(row[1]),))
        assert settings.silos == tuple(int(s) for s in silos.split(","))
        assert (settings.distributions, settings.q, settings.methods) == (distributions, q, methods)
        assert settings.rounds == int(rest[0])
        assert settings.hyper.params(settings.users[0]) == {
            "global_lr": float(rest[1]),
            "clip": float(rest[2]),
            "local_lr": float(rest[3]),
            "local_epochs": int(rest[4]),
        }


def test_protocol_runtime_settings_are_settings_md():
    line = _search(r"- Medical: (.*)", _text())[1]
    match = re.fullmatch(
        r"(\w+ and \w+), (\d+ and \d+) users, (\w+), ([\w-]+), T=(\d+), global lr ([\d.]+), C ([\d.]+), "
        r"local lr ([\d.]+), Q (\d+)\.",
        line,
    )
    assert match is not None, line
    datasets, users, distribution, method, rounds, glr, clip, llr, epochs = match.groups()
    assert tuple(s.dataset for s in PROTOCOL_RUNTIME) == tuple(
        NAMES[d] for d in datasets.split(" and ")
    )
    for settings in PROTOCOL_RUNTIME:
        assert settings.users == tuple(int(u) for u in users.split(" and "))
        assert (settings.distributions, settings.methods, settings.rounds) == (
            (distribution,),
            (method,),
            int(rounds),
        )
        assert settings.silos == (DATASET_DEFAULTS[settings.dataset].n_silos,)
        assert settings.hyper.params(10) == {
            "global_lr": float(glr),
            "clip": float(clip),
            "local_lr": float(llr),
            "local_epochs": int(epochs),
        }


def test_run_config_defaults_are_the_table():
    """Every dataset, method family (and the -w variants) and user count of settings.md: an unset RunConfig takes
    the table's hyperparameters, silos and batch size (the ones a method does not use stay None)."""
    unused = {"DEFAULT": ("clip",), "ULDP-SGD": ("local_lr", "local_epochs")}
    for (name, family, n_users), want in _privacy_utility_rows().items():
        methods = {
            "ULDP-GROUP": ("ULDP-GROUP-2", "ULDP-GROUP-max"),
            "ULDP-SGD": ("ULDP-SGD", "ULDP-SGD-w"),
            "ULDP-AVG": ("ULDP-AVG", "ULDP-AVG-w"),
        }.get(family, (family,))
        for method in methods:
            config = RunConfig(name, method, n_users, rounds=1)
            for key in ("global_lr", "clip", "local_lr", "local_epochs"):
                assert getattr(config, key) == (
                    None if key in unused.get(family, ()) else want[key]
                ), (config, key)
            defaults_row = DATASET_DEFAULTS[name]
            assert (config.n_silos, config.batch_size) == (
                defaults_row.n_silos,
                defaults_row.batch_size,
            )
            assert config.sigma == (None if family == "DEFAULT" else defaults.SIGMA)
            assert config.delta == defaults.DELTA


def test_the_medical_grids_run_twenty_seeds_at_the_paper_profile_and_the_others_the_papers_five():
    from uldp.paper.experiments import expand

    for grid in ("heart_disease", "tcga_brca"):
        seeds = {spec.seed for spec in expand(grid, "paper")}
        assert seeds == set(range(20)) == set(paper_settings.paper_seeds(grid))
    for grid in ("creditcard", "weighting", "protocol_runtime"):
        assert {spec.seed for spec in expand(grid, "paper")} == set(paper_settings.PAPER_SEEDS)
    # the smaller profiles keep their reductions' seeds
    assert {spec.seed for spec in expand("heart_disease", "default")} == {0}
