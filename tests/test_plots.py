"""The paper-like figures (uldp.paper.plots): layout, and curves equal to the mean and std over seeds computed here."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from test_scorecard import world

from uldp.paper import plots
from uldp.paper.experiments import ResultSet


@pytest.fixture(scope="module")
def data():
    return world(profile="smoke", seeds=(0, 1, 2))


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _line(ax, label):
    return next(line for line in ax.get_lines() if line.get_label() == label)


def test_privacy_utility_figure_draws_mean_and_std_band_per_setting(data):
    results = data["heart_disease"]
    fig = plots.privacy_utility_figure(results)
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    axes = np.array(fig.axes).reshape(len(panels), 2)
    assert [ax.get_title() for ax in axes[:, 0]] == panels
    assert axes[0, 0].get_ylabel() == "test accuracy" and axes[0, 1].get_yscale() == "log"
    runs = [r for r in results.runs if r["panel"] == panels[0] and r["series"] == "ULDP-AVG"]
    curves = np.array([r["result"]["accuracy"] for r in runs])
    line = _line(axes[0, 0], "ULDP-AVG")
    np.testing.assert_allclose(line.get_ydata(), curves.mean(axis=0))
    band = axes[0, 0].collections[
        [line.get_label() for line in axes[0, 0].get_lines()].index("ULDP-AVG")
    ]
    upper = band.get_paths()[0].vertices[:, 1].max()
    assert upper == pytest.approx((curves.mean(axis=0) + curves.std(axis=0, ddof=1)).max())
    assert "DEFAULT" in [line.get_label() for line in axes[0, 0].get_lines()]
    assert "DEFAULT" not in [
        line.get_label() for line in axes[0, 1].get_lines()
    ]  # no guarantee, no epsilon curve
    assert plots.METHOD_COLORS["ULDP-AVG-w"] == _line(axes[0, 0], "ULDP-AVG-w").get_color()


def test_mnist_shows_test_loss_then_accuracy_then_epsilon_and_tcga_the_c_index(data):
    fig = plots.privacy_utility_figure(data["mnist"])
    assert [ax.get_ylabel() for ax in fig.axes[:3]] == [
        "test loss",
        "test accuracy",
        plots.LABELS["epsilon"],
    ]
    fig = plots.privacy_utility_figure(data["tcga_brca"])
    assert fig.axes[0].get_ylabel() == "C-index"


def test_a_tailed_metric_is_drawn_as_medians_and_quartiles_one_panel_per_method(data):
    """TcgaBrca's C-index: per setting a panel per method, its line the median over seeds (computed here with
    numpy) and its band the quartiles, DEFAULT's median in every other panel, then the epsilon of every method."""
    results = data["tcga_brca"]
    panel = results.covered_panels()[0]
    one = results.only_panels([panel])
    fig = plots.privacy_utility_figure(one)
    series = list(dict.fromkeys(run["series"] for run in one.runs))
    methods, epsilon = fig.axes[: len(series)], fig.axes[len(series)]
    seeds = {s: sum(run["series"] == s for run in one.runs) for s in series}
    assert [ax.get_title() for ax in methods] == [f"{s} ({seeds[s]} seeds)" for s in series]
    assert epsilon.get_title() == f"{panel}\nevery method's ε" and epsilon.get_yscale() == "log"
    curves = np.array([run["result"]["c_index"] for run in one.runs if run["series"] == "ULDP-AVG"])
    avg = methods[series.index("ULDP-AVG")]
    np.testing.assert_allclose(_line(avg, "ULDP-AVG").get_ydata(), np.median(curves, axis=0))
    band = np.asarray(avg.collections[0].get_paths()[0].vertices)[:, 1]
    assert band.max() == pytest.approx(np.quantile(curves, 0.75, axis=0).max())
    assert band.min() == pytest.approx(np.quantile(curves, 0.25, axis=0).min())
    default = np.array([run["result"]["c_index"] for run in one.runs if run["series"] == "DEFAULT"])
    np.testing.assert_allclose(
        _line(avg, "DEFAULT's median").get_ydata(), np.median(default, axis=0)
    )
    assert "DEFAULT's median" not in [line.get_label() for line in methods[0].get_lines()]
    assert {ax.get_ylim() for ax in methods} == {methods[0].get_ylim()}  # one y axis to compare on
    low, high = methods[0].get_ylim()
    assert low <= 0.5 <= high  # the chance level is in view
    assert fig.legends and not fig.axes[0].get_legend()


def test_weighting_figure_has_a_panel_per_dataset_and_silo_count_with_zipf_dashed(data):
    results = data["weighting"]
    fig = plots.weighting_figure(results)
    assert [ax.get_title() for ax in fig.axes] == list(
        dict.fromkeys(r["panel"] for r in results.runs)
    )
    assert _line(fig.axes[0], "ULDP-AVG-w, zipf").get_linestyle() == "--"
    assert _line(fig.axes[0], "ULDP-AVG-w, uniform").get_linestyle() == "-"


def test_user_sampling_figure_one_line_per_q(data):
    results = data["user_sampling"]
    fig = plots.user_sampling_figure(results)
    assert {line.get_label() for line in fig.axes[0].get_lines()} == {
        r["series"] for r in results.runs if r["panel"] == results.runs[0]["panel"]
    }


def test_empty_results_give_a_clear_error():
    empty = ResultSet("mnist", "paper", (), (), "nowhere")
    for draw in (plots.privacy_utility_figure, plots.weighting_figure, plots.user_sampling_figure):
        with pytest.raises(ValueError, match="no stored results for grid 'mnist'"):
            draw(empty)


def test_runtime_table_splits_each_round_into_silo_and_server_time():
    timings = {
        "rounds": [{"aggregation": 1.0, "encrypt_weights": 0.5, "silo_weighting": 2.0}] * 2,
        "setup": {"paillier_keygen": 3.0, "key_exchange": 0.25, "blinded_histogram": 0.125},
    }
    runs = tuple(
        {
            "panel": "heart_disease",
            "series": "|U|=10",
            "seed": seed,
            "params": {"dataset": "heart_disease", "n_users": 10},
            "result": {
                "seconds": [9.5, 5.5 + seed],
                "info": {"n_silos": 4, "secure_timings": timings},
            },
        }
        for seed in (0, 2)
    )
    table = plots.runtime_table(ResultSet("protocol_runtime", "paper", runs, (), "memory"))
    row = table.loc[("heart_disease", 10)]
    # per silo: (round seconds - server's 1.5 s - the set-up's 3.375 s in round 1) / 4 silos, over rounds then seeds
    seed0 = np.mean([(9.5 - 1.5 - 3.375) / 4, (5.5 - 1.5) / 4])
    seed2 = np.mean([(9.5 - 1.5 - 3.375) / 4, (7.5 - 1.5) / 4])
    assert row["training per silo"] == pytest.approx((seed0 + seed2) / 2)
    assert row["encrypted weighting per silo"] == pytest.approx(
        2.0 / 4
    )  # the silos' 2 s of weighting, per silo
    assert row["local training per silo"] == pytest.approx((seed0 + seed2) / 2 - 2.0 / 4)
    assert (row["key set-up"], row["blinded histogram"], row["aggregation"]) == (3.25, 0.125, 1.5)
    assert (
        len(plots.runtime_figure(ResultSet("protocol_runtime", "paper", runs, (), "memory")).axes)
        == 2
    )
    with pytest.raises(
        ValueError, match="no run of grid 'protocol_runtime' has secure-aggregation timings"
    ):
        plots.runtime_table(ResultSet("protocol_runtime", "paper", (), (), "memory"))


@pytest.mark.parametrize(
    "grid, draw",
    [
        ("heart_disease", "privacy_utility_figure"),
        ("weighting", "weighting_figure"),
        ("user_sampling", "user_sampling_figure"),
    ],
)
def test_a_figure_of_one_covered_panel(data, grid, draw):
    """What a chapter draws when paper-profile results cover only some panels (ResultSet.only_panels)."""
    panel = data[grid].covered_panels()[0]
    one = data[grid].only_panels([panel])
    assert {run["panel"] for run in one.runs} == {panel} and one.covered_panels() == (panel,)
    fig = getattr(plots, draw)(one)
    assert panel in {ax.get_title() for ax in fig.axes}
    with pytest.raises(ValueError, match=r"'no such panel'.*its panels: "):
        data[grid].only_panels([panel, "no such panel"])


def test_a_chapter_shows_the_whole_paper_panels_then_those_in_part_then_its_own_runs(
    data, monkeypatch
):
    """ExperimentChapter.result_sets: the order a chapter draws its figures in; a panel stored in part is drawn with
    only its stored lines, its caption naming the lines not stored, after a note that says it is in part and names
    the device its runs trained on."""
    from uldp.paper.chapters import experiment as chapter_module
    from uldp.paper.experiments import ChapterResults, expand

    results = data["user_sampling"]
    whole, part = dict.fromkeys(run["panel"] for run in results.runs)
    specs = [
        spec for spec in expand("user_sampling", "smoke", seeds=[0, 1, 2]) if spec.panel == part
    ]
    first_line = specs[0].series
    stored = [
        dict(
            run,
            key=f"key-{run['seed']}",
            config={"device": "cpu", "precision": "float32"},
            provenance={"date": "2026-11-28T08:00", "command": "uldp grid", "wall_seconds": 1.0},
        )
        for run in results.runs
        if run["panel"] == part and run["series"] == first_line
    ]
    partial = ResultSet(
        "user_sampling",
        "paper",
        tuple(stored),
        tuple(spec for spec in specs if spec.series != first_line),
        "memory",
    )
    assert partial.partial_panels() == (part,) and partial.covered_panels() == ()
    assert results.partial_panels() == () and results.only_panels([whole]).partial_panels() == ()
    shown = ChapterResults(results, "note", results.only_panels([whole]), partial)
    chapter = chapter_module.ExperimentChapter("user_sampling", "smoke", shown, {})
    assert chapter.result_sets() == [shown.paper_panels, partial, results]
    alone = chapter_module.ExperimentChapter(
        "user_sampling", "smoke", ChapterResults(results, "n"), {}
    )
    assert alone.result_sets() == [results]
    captions: list[str] = []
    monkeypatch.setattr(chapter_module, "show_captioned", lambda fig, text: captions.append(text))
    chapter_module.show_figure(partial, plots.user_sampling_figure, "Figure 9")
    absent = list(dict.fromkeys(spec.series for spec in specs if spec.series != first_line))
    assert len(captions) == 1 and f"not yet: {', '.join(absent)}" in captions[0]
    note = chapter_module.partial_runs_note(partial)
    assert f"in part: {part}.** {len(stored)} of {len(specs)} runs" in note
    assert "trained on cpu in float32" in note


# --- every line is its series, in a style of its own ------------------------------------------------------------


def _line_style(line) -> tuple:
    from matplotlib.colors import to_rgba

    return to_rgba(line.get_color()), line.get_marker(), line.get_linestyle()


@pytest.mark.parametrize(
    "grid, draw, metrics",
    [
        ("heart_disease", "privacy_utility_figure", ["accuracy", "epsilon"]),
        ("user_sampling", "user_sampling_figure", ["accuracy", "epsilon"]),
        ("weighting", "weighting_figure", ["test_loss"]),
    ],
)
def test_each_line_is_the_mean_of_the_series_its_label_names(data, grid, draw, metrics):
    results = data[grid]
    check_lines(results, getattr(plots, draw)(results), metrics)


def test_a_series_without_a_style_of_its_own_keeps_one_style_in_every_panel(data):
    """Labels the library has no style for (another method, a federation of your own) take the series' place in
    the whole figure, not in the panel: a panel lacking an earlier series must not recolour the later ones."""
    results = data["heart_disease"]
    first = results.runs[0]["panel"]
    names = {
        series: f"method {index}"
        for index, series in enumerate(dict.fromkeys(r["series"] for r in results.runs))
    }
    runs = tuple(
        {**run, "series": names[run["series"]]}
        for run in results.runs
        if not (run["panel"] == first and names[run["series"]] == "method 2")
    )
    relabelled = ResultSet(results.grid, results.profile, runs, (), "memory")
    check_lines(relabelled, plots.privacy_utility_figure(relabelled), ["accuracy", "epsilon"])


def check_lines(results, fig, metrics):
    """Each line of ``fig`` is the mean over seeds of the series its label names, in a style that is the same in
    every panel and in the legend, and differs from the other series' of its panel."""
    panels = list(dict.fromkeys(run["panel"] for run in results.runs))
    axes = np.array([ax for ax in fig.axes if ax.get_lines()])
    axes = axes.reshape(len(panels), len(metrics)) if len(metrics) > 1 else axes.reshape(1, -1).T
    styles: dict[str, tuple] = {}
    for row, panel in enumerate(panels):
        for column, metric in enumerate(metrics):
            lines = axes[row, column].get_lines()
            assert lines
            for line in lines:
                series = line.get_label()
                runs = [
                    r["result"][metric]
                    for r in results.runs
                    if r["panel"] == panel and r["series"] == series
                ]
                assert runs, (
                    f"a line labelled {series!r} in panel {panel!r}, but no such series there"
                )
                values = np.array(runs, dtype=float)
                # on a log axis the curve is the geometric mean over seeds
                expected = (
                    np.exp(np.log(values).mean(axis=0))
                    if axes[row, column].get_yscale() == "log"
                    else values.mean(axis=0)
                )
                np.testing.assert_allclose(line.get_ydata(), expected)
                # one style per label in every panel: the figure's single legend shows each line's own style
                assert styles.setdefault(series, _line_style(line)) == _line_style(line), series
            in_panel = [_line_style(line) for line in lines]
            assert len(set(in_panel)) == len(in_panel), "two series of one panel look the same"
    legend = fig.legends[0]
    for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
        assert _line_style(handle) == styles[text.get_text()]


def test_method_styles_differ_without_colour_and_in_colour():
    styles = plots.METHOD_STYLES.values()
    assert len({(s["marker"], s["linestyle"]) for s in styles}) == len(
        plots.METHOD_STYLES
    )  # greyscale
    assert len({s["marker"] for s in styles}) == len(plots.METHOD_STYLES)
    assert len({s["color"] for s in styles}) == len(plots.METHOD_STYLES)
    assert {s["color"] for s in styles} <= set(plots.PALETTE)


def test_figures_fit_a_page_at_a_sharp_resolution(data):
    for fig in (
        plots.privacy_utility_figure(data["mnist"]),
        plots.weighting_figure(data["weighting"]),
    ):
        assert fig.get_figwidth() <= 10.0 and fig.dpi >= 150


def test_epsilon_bands_are_a_factor_either_side_of_the_geometric_mean():
    """Three seeds' epsilons 1, 10 and 100 (logs 0, 1, 2): the curve is 10, the band 10 ** (1 +- 1) = 1 to 100, where
    mean +- std of the values themselves (37 +- 54) would reach below zero, clipped to decades of nothing."""
    runs = tuple(
        {
            "key": f"k{seed}",
            "panel": "p",
            "series": "ULDP-AVG",
            "seed": seed,
            "params": {"dataset": "heart_disease", "method": "ULDP-AVG"},
            "result": {"accuracy": [0.6, 0.7], "epsilon": [value, value]},
            "provenance": {"wall_seconds": 1.0},
        }
        for seed, value in enumerate((1.0, 10.0, 100.0))
    )
    fig = plots.privacy_utility_figure(ResultSet("heart_disease", "paper", runs, (), "memory"))
    epsilon_axes = fig.axes[1]
    np.testing.assert_allclose(_line(epsilon_axes, "ULDP-AVG").get_ydata(), [10.0, 10.0])
    band = np.asarray(epsilon_axes.collections[0].get_paths()[0].vertices)[:, 1]
    assert band.min() == pytest.approx(1.0) and band.max() == pytest.approx(100.0)


def test_legends_are_outside_the_axes_and_read_at_9_pt_where_the_page_shows_them(data):
    """Every figure of this module, at the size the book's 900 px article shows it (96 px an inch, at most its
    own width at the resolution the book saves it), has its legends outside every axes at 9 pt or more."""
    import pandas as pd

    from uldp.paper.chapters.captions import figure_metadata

    table = pd.DataFrame({"a": [1.0, 4.0]}, index=pd.Index([2, 4], name="k"))
    figures = [
        plots.privacy_utility_figure(data["mnist"]),
        plots.weighting_figure(data["weighting"]),
        plots.user_sampling_figure(data["user_sampling"]),
        plots.group_privacy_figure(table, [("a", "o-", "route a")], title="t"),
    ]
    for fig in figures:
        fig.canvas.draw()
        metadata = figure_metadata(fig)
        width_px = fig.get_figwidth() * max(fig.dpi, 150)
        shown = metadata["legend_pt"] * min(width_px, 900) / (96 * fig.get_figwidth())
        assert metadata["legends_inside"] == 0 and shown >= 9, (fig.get_suptitle(), metadata)


def test_group_privacy_figure_draws_each_route_under_its_label():
    import pandas as pd

    from uldp.paper.plots import group_privacy_figure

    table = pd.DataFrame(
        {"a": [1.0, 4.0, 16.0], "b": [2.0, 3.0, 5.0]}, index=pd.Index([2, 4, 8], name="k")
    )
    fig = group_privacy_figure(table, [("b", "s-", "route b"), ("a", "o-", "route a")], title="t")
    ax = fig.axes[0]
    drawn = {line.get_label(): np.asarray(line.get_ydata()).tolist() for line in ax.get_lines()}
    assert drawn == {"route b": [2.0, 3.0, 5.0], "route a": [1.0, 4.0, 16.0]}
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and ax.get_title() == "t"
    plt.close(fig)
