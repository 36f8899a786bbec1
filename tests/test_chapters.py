"""Tests of uldp.paper.chapters: the computed findings, tables, notes and figures of the chapters (the rules that the
chapters' own sources obey are tests/test_book_sources.py's)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pytest
from IPython.display import Markdown

from uldp.paper import chapters, experiments, plots, scorecard
from uldp.paper.chapters import captions as captions_module, experiment, methods
from uldp.paper.experiments import ResultSet
from uldp.paper.verdicts import HOLDS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BOOK = Path(__file__).resolve().parent.parent / "book"


def _run(
    panel: str,
    series: str,
    seed: int,
    values: list[float],
    *,
    key: str | None = None,
    metric: str = "balanced_accuracy",
) -> dict:
    return {
        "key": key or f"{panel}/{series}/{seed}",
        "panel": panel,
        "series": series,
        "seed": seed,
        "params": {"dataset": "heart_disease", "method": series},
        "result": {metric: values, "accuracy": values, "epsilon": [1.0] * len(values)},
        "provenance": {"wall_seconds": 2.0, "date": "2026-01-01T00:00", "command": "test"},
    }


def test_trivial_runs_name_the_seed_at_chance_level() -> None:
    runs = (
        _run("A", "ULDP-NAIVE", 0, [0.6, 0.5]),
        _run("A", "ULDP-NAIVE", 1, [0.7, 0.9]),
        _run("A", "ULDP-AVG", 0, [0.8, 0.9]),
    )
    sentences = chapters.trivial_runs(ResultSet("g", "paper", runs, (), "memory"))
    assert len(sentences) == 1
    assert "ULDP-NAIVE" in sentences[0] and "seed 0" in sentences[0] and "1 of 2" in sentences[0]
    assert "noise" not in sentences[0]  # no cause that the results do not show


def test_a_noiseless_default_at_chance_level_is_said_to_explain_the_others() -> None:
    runs = tuple(
        _run("A", series, seed, [0.5, 0.5])
        for series in ("DEFAULT", "ULDP-GROUP-2")
        for seed in (0, 1)
    )
    sentences = chapters.trivial_runs(ResultSet("g", "default", runs, (), "memory"))
    assert any(s.startswith("In A, DEFAULT, which adds no noise") for s in sentences)
    half = (*runs[:1], _run("A", "DEFAULT", 1, [0.5, 0.9]), *runs[2:])
    assert not any(
        "DEFAULT, which adds no noise" in s
        for s in chapters.trivial_runs(ResultSet("g", "default", half, (), "memory"))
    )


def test_spread_runs_find_a_large_standard_deviation_only() -> None:
    runs = (
        _run("A", "ULDP-AVG", 0, [0.5, 0.55]),
        _run("A", "ULDP-AVG", 1, [0.5, 0.75]),
        _run("A", "ULDP-SGD", 0, [0.5, 0.70]),
        _run("A", "ULDP-SGD", 1, [0.5, 0.71]),
    )
    sentences = chapters.spread_runs(ResultSet("g", "paper", runs, (), "memory"), "accuracy")
    # std of (0.55, 0.75) is 0.141 (sample std), of (0.70, 0.71) 0.007
    assert len(sentences) == 1 and "ULDP-AVG" in sentences[0] and "0.141" in sentences[0]


def test_shared_runs_are_the_series_with_one_run_in_every_panel() -> None:
    runs = (
        _run("A", "DEFAULT", 0, [0.8], key="same"),
        _run("B", "DEFAULT", 0, [0.8], key="same"),
        _run("A", "ULDP-AVG", 0, [0.8]),
        _run("B", "ULDP-AVG", 0, [0.8]),
    )
    assert chapters.shared_runs(ResultSet("g", "paper", runs, (), "memory")) == ["DEFAULT"]


def test_run_time_counts_a_shared_run_once() -> None:
    runs = (
        _run("A", "DEFAULT", 0, [0.8], key="same"),
        _run("B", "DEFAULT", 0, [0.8], key="same"),
        _run("A", "ULDP-AVG", 0, [0.8]),
    )
    assert chapters.run_time(ResultSet("g", "paper", runs, (), "memory")) == (4.0, 2.0, 2)


def test_scale_sentence_of_a_small_profile_warns_against_reading_numbers() -> None:
    runs = (_run("|U|=50, uniform", "ULDP-AVG", 0, [0.8]),)
    runs[0]["params"].update(rounds=2, n_users=10)
    text = chapters.scale_sentence(ResultSet("heart_disease", "smoke", runs, (), "memory"))
    assert (
        "smoke" in text
        and "instead of the paper's 50" in text
        and "not what the paper's figure shows" in text
    )


def test_a_smoke_figure_is_never_captioned_as_the_papers(monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown: list = []
    for module in (experiment, captions_module):
        monkeypatch.setattr(module, "display", lambda *items: shown.extend(items))
    run = _run("|U|=50, uniform", "ULDP-AVG", 0, [0.8])
    for profile in ("smoke", "paper"):
        chapters.show_figure(
            ResultSet("heart_disease", profile, (run,), (), "memory"),
            lambda _: plt.figure(),
            "Figure 6",
        )
    captions = [item.data.split("\n", 3)[3] for item in shown if isinstance(item, Markdown)]
    assert "stand-in for the paper's Figure 6" in captions[0] and "not its figure" in captions[0]
    assert re.match(
        r"\*\*Figure \d+\.\*\* The paper's Figure 6, reproduced at the scale \*\*paper\*\*",
        captions[1],
    )


def test_runs_that_learned_nothing_are_not_drawn_outside_the_paper_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A smoke run of HeartDisease ending at balanced accuracy 0.52 (chance 0.5, within a tenth of the way to 1) is
    said in words, not drawn; at 0.56 it is drawn; a paper-profile run is drawn whatever it reached."""
    shown: list = []
    for module in (experiment, captions_module):
        monkeypatch.setattr(module, "display", lambda *items: shown.extend(items))
    drawn: list = []

    def draw(results: ResultSet) -> Figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        drawn.append(results.profile)
        return plt.figure()

    for profile, value in (("smoke", 0.52), ("smoke", 0.56), ("paper", 0.52)):
        runs = (_run("|U|=50, uniform", "ULDP-AVG", 0, [0.5, value]),)
        chapters.show_figure(
            ResultSet("heart_disease", profile, runs, (), "memory"), draw, "Figure 6"
        )
    assert drawn == ["smoke", "paper"]
    assert shown[0].data.startswith(
        "No figure of this build's **smoke**-profile runs for the paper's Figure 6"
    )
    assert "(final balanced accuracy 0.52 to 0.52)" in shown[0].data


def test_a_figure_is_a_numbered_myst_figure_with_its_caption_and_a_label_of_its_own() -> None:
    import base64

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = chapters.captioned(plt.figure(figsize=(1, 1)), "Look at the left panel.").data
    head, label, _, caption, end = first.split("\n")
    assert head.startswith("````{figure} data:image/png;base64,") and end == "````"
    assert base64.b64decode(head.split(",", 1)[1]).startswith(b"\x89PNG")
    found = re.match(r"\*\*Figure (\d+)\.\*\* Look at the left panel\.$", caption)
    assert found is not None
    number = int(found.group(1))
    assert label.startswith(":name: fig-")
    again = chapters.captioned(plt.figure(figsize=(1, 1)), "Look at the left panel.").data
    other = chapters.captioned(plt.figure(figsize=(1, 1)), "Look at the right panel.").data
    assert again.split("\n")[1] == label != other.split("\n")[1]
    # numbered in the order shown: the page's next figures are the next numbers
    assert again.split("\n")[3].startswith(f"**Figure {number + 1}.**")
    assert other.split("\n")[3].startswith(f"**Figure {number + 2}.**")


def test_figures_are_drawn_one_per_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown: list = []
    for module in (experiment, captions_module):
        monkeypatch.setattr(module, "display", lambda *items: shown.extend(items))
    drawn: list = []

    def draw(results: ResultSet) -> plt.Figure:
        drawn.append(results)
        return plt.figure()

    runs = tuple(_run(panel, "ULDP-AVG", 0, [0.8]) for panel in ("|U|=50, uniform", "|U|=50, zipf"))
    chapters.show_figure(
        ResultSet("heart_disease", "paper", runs, (), "memory"), draw, "Figure 6", "Look."
    )
    assert [[run["panel"] for run in results.runs] for results in drawn] == [
        ["|U|=50, uniform"],
        ["|U|=50, zipf"],
    ]
    assert [
        item.data.endswith(f"{panel}. Look.\n````")
        for item, panel in zip(shown, ("|U|=50, uniform", "|U|=50, zipf"), strict=True)
    ] == [True, True]


def test_short_profile_note_gives_the_share_of_the_papers_work() -> None:
    runs = tuple(
        {
            **_run(panel, "ULDP-AVG", 0, [0.5]),
            "params": {"dataset": "mnist", "rounds": 20, "local_epochs": 5},
        }
        for panel in ("|U|=100, zipf", "|U|=10000, zipf-noniid")
    )
    for run in runs:
        run["result"]["seconds"] = [1.0, 3.0]
    text = chapters.short_profile_note(ResultSet("mnist", "short", runs, (), "memory")).data
    # the paper: 200 rounds of 50 epochs = 10000 epoch-rounds against 20 x 5 = 100
    assert "1/100 of the paper's work" in text and "20 rounds of 5 local" in text
    assert "about 3 min" in text  # 100 x 2 s per run


def test_claims_are_the_scorecards_rows_on_this_dataset_beside_all_results() -> None:
    data = {
        "creditcard": _pair("creditcard", "ULDP-AVG", "ULDP-SGD"),
        "heart_disease": _pair("heart_disease", "ULDP-SGD", "ULDP-AVG"),
    }
    chapter = chapters.ExperimentChapter("creditcard", "smoke", None, data)  # type: ignore[arg-type]
    shown = chapter.claims().data.set_index("claim")
    expected = scorecard.scorecard(data, grid="creditcard")
    assert shown.index.tolist() == expected["claim"].tolist()
    avg_vs_sgd = expected.set_index("key").loc["avg-vs-sgd", "claim"]
    assert shown.loc[avg_vs_sgd, "verdict on Creditcard"] == HOLDS
    assert shown.loc[avg_vs_sgd, "verdict over all results"] == scorecard.CONTRADICTED


def test_compare_runs_tabulates_the_final_values_of_each_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from uldp.simulation import RunConfig, run

    shown: list = []
    monkeypatch.setattr(methods, "show_captioned", lambda fig, caption: shown.append(fig))
    configs = {
        method: RunConfig(
            dataset="synthetic",
            method=method,
            n_users=10,
            n_silos=3,
            rounds=2,
            local_epochs=1,
            seed=0,
        )
        for method in ("DEFAULT", "ULDP-AVG")
    }
    table = chapters.compare_runs(configs, title="test")
    assert table.index.tolist() == ["DEFAULT", "ULDP-AVG"]
    alone = run(configs["ULDP-AVG"])  # the same seed gives the same run
    assert table.loc["ULDP-AVG", "test loss"] == pytest.approx(alone.test_loss[-1])
    assert table.loc["ULDP-AVG", "epsilon"] == pytest.approx(alone.epsilon[-1])
    assert table["epsilon"].isna()["DEFAULT"]
    figure = shown[0]
    assert [line.get_label() for line in figure.axes[0].lines] == ["DEFAULT", "ULDP-AVG"]
    colour = {line.get_label(): line.get_color() for line in figure.axes[0].lines}
    for axis in figure.axes[
        1:
    ]:  # the epsilon panel has no DEFAULT line: the others keep their colours
        assert all(line.get_color() == colour[line.get_label()] for line in axis.lines)
    assert [line.get_label() for line in figure.axes[2].lines] == ["ULDP-AVG"]


def test_a_private_run_above_default_gets_a_sentence_and_none_below() -> None:
    table = pd.DataFrame(
        {"accuracy": [0.70, 0.74, 0.60], "epsilon": [None, 3.2, 9.0]},
        index=["DEFAULT", "ULDP-NAIVE", "ULDP-GROUP-2"],
    )
    said = methods.noise_against_default(table)
    assert (
        said.count("Here ") == 1
        and "ULDP-NAIVE ends above DEFAULT (accuracy 0.740 against 0.700)" in said
    )
    assert methods.noise_against_default(table.drop(index="ULDP-NAIVE")) == ""
    assert methods.noise_against_default(table.drop(index="DEFAULT")) == ""


@pytest.mark.parametrize(
    ("dataset", "metric", "level"),
    [
        (
            "mnist",
            "balanced_accuracy",
            0.1,
        ),  # ten digits: the mean recall of a constant answer is 1/10
        ("creditcard", "balanced_accuracy", 0.5),
        ("heart_disease", "balanced_accuracy", 0.5),  # one logit: a binary classifier
        ("tcga_brca", "c_index", 0.5),
    ],
)
def test_chance_level_is_that_of_a_constant_answer(dataset: str, metric: str, level: float) -> None:
    run = _run("A", "DEFAULT", 0, [0.5], metric=metric)
    run["params"]["dataset"] = dataset
    assert chapters.chance_level(
        ResultSet("g", "paper", (run,), (), "memory"), metric
    ) == pytest.approx(level)


def test_chance_level_refuses_a_metric_without_one() -> None:
    with pytest.raises(ValueError, match="accuracy"):
        chapters.chance_level(ResultSet("g", "paper", (), (), "memory"), "accuracy")


def test_a_ten_class_run_at_one_tenth_is_trivial_and_one_at_a_half_is_not() -> None:
    runs = tuple(
        {**_run("A", method, 0, [value]), "params": {"dataset": "mnist", "method": method}}
        for method, value in (("ULDP-AVG", 0.5), ("ULDP-NAIVE", 0.1))
    )
    sentences = chapters.trivial_runs(ResultSet("mnist", "paper", runs, (), "memory"))
    assert len(sentences) == 1 and sentences[0].startswith("**ULDP-NAIVE**")


def test_stored_runtime_shows_the_runtime_table_and_one_line_per_dataset_and_user_count(
    monkeypatch, capsys
):
    shown = []
    monkeypatch.setattr(methods, "display", lambda *objects: shown.extend(objects))
    chapters.show_stored_runtime()
    stored = experiments.load_results("protocol_runtime", "paper")
    if not stored.runs:
        assert "no committed protocol_runtime results" in capsys.readouterr().out and not shown
        return
    table, lines = shown
    expected = plots.runtime_table(stored)
    frame = table.data  # the page's table: no index column, seconds in its headers
    assert list(zip(frame["dataset"], frame["users"], strict=True)) == list(expected.index)
    assert "encrypted weighting per silo (s)" in frame and "row_heading" not in table.to_html()
    rows = lines.data.splitlines()
    assert len(rows) == len(expected)
    for row, ((dataset, users), values) in zip(rows, expected.iterrows(), strict=True):
        ratio = values["encrypted weighting per silo"] / values["local training per silo"]
        assert (
            row.startswith(f"- {dataset}, {users} users:")
            and f"(the weighting {ratio:.1f}x the training)" in row
        )


def test_protocol_scale_reads_the_committed_benchmark_and_computes_its_sentences(monkeypatch):
    """The protocol chapter's numbers come from benchmarks/results/secure_protocol.json: the sentences carry the
    ratios computed from it (server CPU of one ciphertext per parameter over packed, bytes per parameter over a
    float32), and the table one row per setting and backend."""
    document = json.loads(chapters.PROTOCOL_BENCHMARK.read_text())
    mnist = document["results"]["mnist"]
    sentences = chapters.protocol_scale_sentences(document)
    ratio = mnist["paillier"]["server_cpu_s"] / mnist["packed-paillier"]["server_cpu_s"]
    assert f"{ratio:.1f}x less" in sentences
    bytes_per_parameter = mnist["packed-paillier"]["update_bytes"] / mnist["parameters"]
    assert (
        f"{bytes_per_parameter:.1f} bytes per parameter ({bytes_per_parameter / 4:.1f}x a float32)"
        in sentences
    )
    assert document["provenance"]["git_commit"][:10] in sentences
    table = chapters.protocol_scale_table(document)
    assert list(table["backend"]) == ["phe"] + ["paillier", "packed-paillier"] * 3
    shown: list = []
    for module in (methods, captions_module):
        monkeypatch.setattr(module, "display", lambda *objects: shown.extend(objects))
    chapters.show_protocol_scale()
    html = next(
        item.to_html() for item in shown if hasattr(item, "to_html")
    )  # the table, as the page shows it
    assert "not measured" in html and not re.search(r">\s*(nan|NaN|None)\s*<", html)


def test_benchmark_result_reads_the_committed_file_and_names_the_command_when_missing():
    import json
    import re

    from uldp.common.provenance import REPO_ROOT

    stored = chapters.benchmark_result("protocol_scan")
    with open(
        REPO_ROOT / "benchmarks" / "results" / "protocol_scan.json", encoding="utf-8"
    ) as handle:
        assert stored == json.load(handle)
    with pytest.raises(
        FileNotFoundError, match=re.escape("python benchmarks/save.py no_such_benchmark")
    ):
        chapters.benchmark_result("no_such_benchmark")


def _pair(grid: str, better: str, worse: str) -> ResultSet:
    runs = []
    for series, values in ((better, [0.6, 0.9]), (worse, [0.5, 0.8])):
        run = _run("|U|=100, uniform", series, 0, values, metric="accuracy")
        run["result"]["balanced_accuracy"] = values  # what Creditcard's claims read
        run["params"] = {
            "dataset": grid,
            "method": series,
            "n_users": 100,
            "distribution": "uniform",
        }
        runs.append(run)
    return ResultSet(grid, "paper", tuple(runs), (), "memory")


def test_a_claim_is_judged_per_dataset_and_said_where_it_holds_and_where_not() -> None:
    data = {
        "creditcard": _pair("creditcard", "ULDP-AVG", "ULDP-SGD"),
        "heart_disease": _pair("heart_disease", "ULDP-SGD", "ULDP-AVG"),
    }
    verdicts = chapters.Verdicts.judge(data)
    overall = verdicts.overall.set_index("key").loc["avg-vs-sgd", "verdict"]
    by_view = {
        view.title: rows.set_index("key").loc["avg-vs-sgd", "verdict"]
        for view, rows in verdicts.views.items()
        if "avg-vs-sgd" in set(rows["key"])
    }
    assert overall == scorecard.CONTRADICTED
    assert by_view["Creditcard"] == HOLDS and by_view["HeartDisease"] == scorecard.CONTRADICTED
    text = chapters.claim_findings(verdicts, "avg-vs-sgd")
    assert "**holds** on {doc}`Creditcard <exp_creditcard>`" in text
    assert "**contradicted** on {doc}`HeartDisease <exp_heart_disease>`" in text
    assert "MNIST" not in text  # not measured there: not a place where it holds or fails
    with pytest.raises(ValueError, match="unknown claim 'nope'"):
        chapters.claim_findings(verdicts, "nope")


def test_scorecard_tables_escape_pipes_and_link_each_claim_to_its_chapters() -> None:
    links = chapters.claim_chapters()
    assert (
        links["avg-vs-sgd"].count("{doc}") == 4
        and "{doc}`Creditcard <exp_creditcard>`" in links["avg-vs-sgd"]
    )
    assert links["weighting"] == "{doc}`Enhanced weighting <exp_weighting>`"
    rows = scorecard.scorecard({})  # every claim "not measured"
    table = chapters.scorecard_markdown(rows.assign(measured="|U|=100"), links).splitlines()
    assert len(table) == 2 + len(rows) and all(line.count(" | ") == 3 for line in table[2:])
    assert "\\|U\\|=100" in table[2]


def test_the_settings_file_is_found_beside_the_data_folder_and_shown_verbatim(
    tmp_path: Path,
) -> None:
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "settings.md").write_text("# Settings\n| a | b |\n```\ncode\n```\n")
    checkout = (
        tmp_path / "checkout"
    )  # no shared/ beside it: the file beside the data folder is the one found
    assert chapters.settings_file(tmp_path / "data", checkout) == tmp_path / "paper" / "settings.md"
    assert chapters.settings_file(tmp_path / "elsewhere" / "data", checkout) is None
    shown = chapters.settings_source(tmp_path / "paper" / "settings.md").data
    assert (
        shown.startswith(":::{dropdown}")
        and "````{code-block} text\n:class: quoted-file\n\n# Settings\n| a | b |\n```\ncode\n```\n````"
        in shown
    )
    missing = chapters.settings_source(None).data
    assert (
        "is not in this checkout" in missing
        and str(tmp_path) not in missing
        and "/" + "work" not in missing
    )


def test_a_line_at_chance_level_is_not_listed_again_for_its_spread() -> None:
    runs = (
        _run("A", "ULDP-NAIVE", 0, [0.5, 0.5]),
        _run("A", "ULDP-NAIVE", 1, [0.5, 0.9]),
        _run("A", "ULDP-AVG", 0, [0.5, 0.6]),
        _run("A", "ULDP-AVG", 1, [0.5, 0.9]),
    )
    results = ResultSet("g", "paper", runs, (), "memory")
    assert [s.split(":")[0] for s in chapters.spread_runs(results, "accuracy")] == [
        "**ULDP-NAIVE** (A)",
        "**ULDP-AVG** (A)",
    ]
    text = "\n".join(experiment._conclude_utility(results))
    assert text.count("**ULDP-NAIVE** (A)") == 1 and text.count("**ULDP-AVG** (A)") == 1


def test_weighting_gap_table_puts_the_authors_uniform_draws_in_the_uniform_column():
    """The committed Figure 8 runs: Creditcard's balanced uniform and TcgaBrca's authors' draws share the figure's
    uniform column, so no cell of the table is missing."""
    results = experiments.load_results("weighting", "paper")
    if results.missing:
        pytest.skip("the committed weighting results are not complete")
    schemes = {run["params"]["distribution"] for run in results.runs}
    assert {"uniform", "uniform-with-replacement", "zipf"} <= schemes
    table = chapters.weighting_gap_table({"weighting": results})
    assert list(table.columns) == ["uniform", "zipf"]
    assert not table.isna().any().any(), table


def test_the_diagram_draws_each_message_of_protocol_1_once_in_order() -> None:
    """One labelled arrow per message between the silos and the server (a square for a step computed on one
    side), the steps in the order of the paper's Protocol 1 (set-up 1(a)-(f), then the round's 2(a)-(c))."""
    import matplotlib

    matplotlib.use("Agg")
    fig = chapters.protocol_diagram()
    right = fig.axes[1]
    texts = [text.get_text() for text in right.texts]
    for step, _, _, what in chapters.PROTOCOL_MESSAGES:
        assert texts.count(f"{step}  {what}") == 1
    between = [m for m in chapters.PROTOCOL_MESSAGES if m[1] != m[2]]
    arrows = [child for child in right.get_children() if type(child).__name__ == "Annotation"]
    assert len(arrows) == len(between)
    steps = [step for step, *_ in chapters.PROTOCOL_MESSAGES]
    assert steps == sorted(steps) and steps[0] == "1(a)" and steps[-1] == "2(c)"
    assert "each round:" in texts


def test_the_glossary_names_every_symbol_of_the_book() -> None:
    table = chapters.glossary().data
    for symbol in (
        "n_{su}",
        "N_u",
        "$q$",
        "\\sigma",
        "$C$",
        "\\lvert S\\rvert",
        "\\lvert U\\rvert",
    ):
        assert symbol in table, symbol
    assert table.splitlines()[0] == "| symbol | what it is | in the paper |"


def test_the_package_exports_every_public_function_and_class_of_its_modules() -> None:
    """The book imports from ``uldp.paper.chapters``: a function added to a module but not to the package's names
    fails a chapter at build time, not here, unless this checks it."""
    import importlib
    import inspect
    import pkgutil

    for info in pkgutil.iter_modules(chapters.__path__):
        module = importlib.import_module(f"uldp.paper.chapters.{info.name}")
        own = [
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and (inspect.isfunction(value) or inspect.isclass(value))
            and value.__module__ == module.__name__
        ]
        assert set(own) <= set(chapters.__all__), (
            info.name,
            sorted(set(own) - set(chapters.__all__)),
        )


def test_gpu_round_note_states_the_committed_gpu_measurements() -> None:
    benchmark = {
        "provenance": {"git_commit": "0123456789abcdef", "date": "2026-11-28T15:52:31+00:00"},
        "results": {
            "device": {"name": "NVIDIA H200"},
            "engine": {
                "problem": {"cpu_threads": 16},
                "record_steps_per_second": {
                    "library_float32": 371000.0,
                    "library_bf16": 742000.0,
                    "library_cpu_float32": 34830.0,
                },
            },
            "paper_round": {"ULDP-AVG-w": {"seconds": 12.4}, "DEFAULT": {"seconds": 21.5}},
        },
    }
    scale = {
        "results": {
            "paper_scale_run": {
                "float32": {"rounds": 3, "seconds_per_round": 18.0},
                "bf16": {"rounds": 3, "seconds_per_round": 21.2},
            }
        }
    }
    text = chapters.gpu_round_note(benchmark, scale).data
    assert "NVIDIA H200" in text and "`0123456789`" in text and "2026-11-28" in text
    assert "371,000 record-steps per second in float32 and 742,000 in bfloat16" in text
    assert "34,830 on that machine's 16 CPU threads" in text
    assert "12 s for ULDP-AVG-w and 22 s for DEFAULT" in text
    assert "about 60 min there" in text  # 200 rounds of 18 s
    assert "200 rounds" not in chapters.gpu_round_note(benchmark, None).data
    assert "No GPU measurement" in chapters.gpu_round_note(None, None).data
