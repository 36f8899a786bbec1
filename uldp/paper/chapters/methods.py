"""What the method chapters run and show (``book/baselines.py``, ``book/uldp_avg_sgd.py``,
``book/weighting_protocol.py``, ``book/protocol_in_practice.py``): a short comparison of runs, Protocol 1's measured
scale and its stored runtime."""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display
from matplotlib.ticker import MaxNLocator

from uldp import simulation
from uldp.paper import experiments, plots
from uldp.paper.chapters.captions import show_captioned
from uldp.paper.verdicts import (
    readable_number,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from matplotlib.figure import Figure

    from uldp.simulation import RunConfig


#: The headers a reader sees for :func:`compare_runs`'s columns.
COMPARE_HEADERS = {
    "run": "method",
    "epsilon": "user-level ε",
    "k": "group size k",
    "records used": "training records used",
    "seconds": "run time (s)",
}
#: What a missing value of :func:`compare_runs`'s table means, per column.
COMPARE_MISSING = {"epsilon": "no guarantee", "k": "no group", "records used": "all"}


def compare_runs(configs: Mapping[str, RunConfig], *, title: str) -> pd.DataFrame:
    """Run each configuration (:func:`uldp.simulation.run`), display their test loss, accuracy and user-level
    epsilon per round side by side, then their final values (missing ones in words), and return those: one short
    comparison for the method chapters.

    Args:
        configs: ``{label: RunConfig}``, in legend order.
        title: The figure's title (say the profile and scale).

    Returns:
        One row per label: final ``test loss``, ``accuracy``, ``epsilon`` (``None`` for DEFAULT), the group size
        ``k`` and ``records used`` where the method has them, and the run's ``seconds``.
    """
    results = {label: simulation.run(config) for label, config in configs.items()}
    fig, axes = plt.subplots(1, 3, figsize=(plots.FIGURE_WIDTH, 3.6), dpi=plots.FIGURE_DPI)
    for index, (label, result) in enumerate(results.items()):
        # one colour and marker per run in every panel (DEFAULT has no epsilon line: no shift of the colour cycle)
        style = {
            "label": label,
            "color": f"C{index % 10}",
            "marker": "os^vDPX*"[index % 8],
            "markevery": max(1, len(result.round) // 8),
        }
        axes[0].plot(result.round, result.test_loss, **style)
        axes[1].plot(result.round, result.accuracy, **style)
        if result.epsilon and result.epsilon[0] is not None:
            axes[2].semilogy(result.round, result.epsilon, **style)
    for ax, label in zip(axes, ("test loss", "test accuracy", "user-level ε"), strict=True):
        ax.set_xlabel("round")
        ax.set_ylabel(label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title)
    plots.figure_legend(fig, axes)
    show_captioned(
        fig,
        f"{title}. Test loss, accuracy and user-level $\\epsilon$ (log scale) per round of each run; "
        "the final values follow.",
    )
    table = pd.DataFrame(
        [
            {
                "run": label,
                "test loss": result.test_loss[-1],
                "accuracy": result.accuracy[-1],
                "epsilon": result.epsilon[-1],
                "k": result.info.get("group_size"),
                "records used": result.info.get("train_records"),
                "seconds": sum(result.seconds),
            }
            for label, result in results.items()
        ]
    ).set_index("run")
    display(
        table.reset_index()
        .rename(columns=COMPARE_HEADERS)
        .style.hide(axis="index")
        .format(
            {
                COMPARE_HEADERS.get(column, column): partial(
                    readable_number, missing=COMPARE_MISSING.get(column, "—")
                )
                for column in table.columns
            }
        )
    )
    return table


def noise_against_default(table: pd.DataFrame) -> str:
    """A sentence for each private run of a :func:`compare_runs` table whose final accuracy is above DEFAULT's (no
    noise, no clipping), saying what that does and does not mean; empty when none is, or without a DEFAULT row.

    Example:
        >>> table = pd.DataFrame({"accuracy": [0.70, 0.74], "epsilon": [None, 3.2]}, index=["DEFAULT", "ULDP-NAIVE"])
        >>> noise_against_default(table).startswith("Here ULDP-NAIVE ends above DEFAULT (accuracy 0.740 against 0.700)")
        True
    """
    if "DEFAULT" not in table.index:
        return ""
    default = float(table.loc["DEFAULT", "accuracy"])
    above = [
        (label, float(row["accuracy"]))
        for label, row in table.iterrows()
        if label != "DEFAULT" and pd.notna(row["epsilon"]) and row["accuracy"] > default
    ]
    return " ".join(
        f"Here {label} ends above DEFAULT (accuracy {accuracy:.3f} against {default:.3f}), although it adds "
        "noise and clips: one seed of a short run, in which DEFAULT's larger, unclipped steps can overshoot and "
        "clipping and noise act as a regulariser. It is not evidence that the noise helps; the experiment "
        "chapters compare the methods over seeds, at the paper's scale."
        for label, accuracy in above
    )


#: Where ``benchmarks/save.py secure_protocol`` writes Protocol 1's measurements per backend, round and side.
PROTOCOL_BENCHMARK = experiments.REPO_ROOT / "benchmarks" / "results" / "secure_protocol.json"
#: Bytes of one float32 parameter: what a plain (unprotected) update sends per parameter.
FLOAT32_BYTES = 4


def protocol_scale_table(document: Mapping[str, Any]) -> pd.DataFrame:
    """Per setting (the paper's artificial default, the MNIST CNN, 10^6 parameters) and way of computing it, the
    seconds of a round per side, wall and CPU, and the bytes each silo uploads (from the benchmark's document)."""
    rows = []
    default = document["results"]["default"]
    rows.append(
        {
            "setting": f"artificial default ({default['parameters']} parameters)",
            "backend": "phe",
            "silo, wall (s)": default["phe"]["silo_s"],
            "server, wall (s)": default["phe"]["server_s"],
        }
    )
    settings = [
        ("default", f"artificial default ({default['parameters']} parameters)"),
        ("mnist", "MNIST CNN (21840 parameters, projected silo)"),
        ("million", "10^6 parameters (projected)"),
    ]
    for key, label in settings:
        for backend in ("paillier", "packed-paillier"):
            part = document["results"][key][backend]
            rows.append(
                {
                    "setting": label,
                    "backend": backend,
                    "silo, wall (s)": part["silo_s"],
                    "silo, CPU (s)": part.get("silo_cpu_s"),
                    "server, wall (s)": part["server_s"],
                    "server, CPU (s)": part.get("server_cpu_s"),
                    "update bytes per parameter": part["update_bytes"]
                    / (
                        document["results"][key]["parameters"]
                        if key != "default"
                        else default["parameters"]
                    ),
                }
            )
    return pd.DataFrame(rows)


def protocol_scale_figure(document: Mapping[str, Any]) -> Figure:
    """The paper's artificial grid per backend: the slowest silo's and the server's seconds of one round."""
    grid = pd.DataFrame(document["results"]["grid"])
    fig, axes = plt.subplots(1, 3, figsize=(plots.FIGURE_WIDTH, 3.6), sharey=True)
    for ax, axis in zip(axes, ("parameters", "users", "silos"), strict=True):
        for (backend, side), style in zip(
            [(b, s) for b in ("paillier", "packed-paillier") for s in ("silo_s", "server_s")],
            ("o-", "o--", "s-", "s--"),
            strict=True,
        ):
            rows = grid[(grid.axis == axis) & (grid.backend == backend)]
            ax.plot(rows.value, rows[side], style, label=f"{backend}, {side.split('_')[0]}")
        ax.set_xlabel(f"number of {axis}")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("seconds per round")
    plots.figure_legend(fig, axes, title=False)
    return fig


def protocol_scale_sentences(document: Mapping[str, Any]) -> str:
    """What the measurements say about the paper's open problem, every number computed from the document."""
    results, source = document["results"], document["provenance"]
    mnist, million = results["mnist"], results["million"]
    packed, plain = mnist["packed-paillier"], mnist["paillier"]
    check = million["packed-paillier"]["check"]
    lines = [
        (
            f"Measured by `{source['command']}` at commit `{source['git_commit'][:10]}` on {source['date'][:10]}, on a "
            f"machine with {source['cpu_count']} CPUs shared with other work (load average "
            f"{results['load_at_start']:.1f} at the start), with {results['processes']} worker processes per side. The "
            f"wall seconds move with the load; the CPU seconds (this process and its workers) are the work itself, and "
            f"on an otherwise idle machine a side's wall time is at most its CPU time plus starting the workers."
        ),
        (
            f"- **The paper's artificial default** ({results['default']['parameters']} parameters, "
            f"{results['default']['users']} users, {results['default']['silos']} silos): the straightforward phe "
            f"sequence's slowest silo took {results['default']['phe']['silo_s']:.1f} s; the paillier backend's "
            f"{results['default']['paillier']['silo_s']:.2f} s "
            f"({results['default']['paillier']['speedup_per_silo_vs_phe']:.0f}x less) and the packed backend's "
            f"{results['default']['packed-paillier']['silo_s']:.2f} s "
            f"({results['default']['packed-paillier']['speedup_per_silo_vs_phe']:.0f}x less). "
            f"On models this small the packed server "
            f"({results['default']['packed-paillier']['server_s']:.2f} s) is slower than the per-parameter "
            f"one ({results['default']['paillier']['server_s']:.2f} s): its rescale costs a decryption and an "
            f"encryption per user, more than the few decryptions it saves."
        ),
        (
            f"- **MNIST CNN round.** The packed backend's server does {packed['server_cpu_s']:.1f} s of CPU work "
            f"({packed['server_s']:.1f} s wall here) against {plain['server_cpu_s']:.1f} s CPU "
            f"({plain['server_s']:.1f} s wall) for one ciphertext per parameter, "
            f"{plain['server_cpu_s'] / packed['server_cpu_s']:.1f}x less; each silo uploads "
            f"{packed['ciphertext_bytes_per_parameter']:.1f} bytes per parameter ({packed['ratio_to_float32']:.1f}x a "
            f"float32) instead of {plain['ciphertext_bytes_per_parameter']:.0f}. A silo's round is "
            f"{packed['silo_cpu_s']:.1f} s CPU against {plain['silo_cpu_s']:.1f} s: packing costs the silo b squarings "
            f"per parameter."
        ),
        (
            f"- **10^6 parameters, projected.** With packing a silo does "
            f"{million['packed-paillier']['silo_cpu_s'] / 60:.1f} min and the server "
            f"{million['packed-paillier']['server_cpu_s'] / 60:.1f} min of CPU work per round; "
            f"without, {million['paillier']['silo_cpu_s'] / 60:.1f} min and "
            f"{million['paillier']['server_cpu_s'] / 60:.1f} min. The projection's check: a silo round of "
            f"{check['users']} users and {check['parameters']} parameters took "
            f"{check['measured_silo_cpu_s']:.1f} s CPU, "
            f"{check['measured_over_projected']:.2f}x the projected {check['projected_silo_cpu_s']:.1f} s."
        ),
        (
            f"- **Exact within P everywhere:** {'yes' if results['exact_within_p'] else 'NO'} (every measured round of "
            f"both backends decodes within P = {results['precision']:g} of the plain weighted sum; the straightforward "
            f"phe sequence and the paillier backend decode to equal floats: "
            f"{results['default']['phe_equals_paillier']})."
        ),
    ]
    return "\n\n".join(lines)


def show_protocol_scale() -> None:
    """Display the committed measurements of ``benchmarks/secure_protocol.py`` (per backend, round and side): the
    table, the artificial grid and the sentences; or say that none are committed."""
    if not PROTOCOL_BENCHMARK.is_file():
        print(f"no committed {PROTOCOL_BENCHMARK.name} in this checkout")
        return
    document = json.loads(PROTOCOL_BENCHMARK.read_text())
    table = protocol_scale_table(document)
    numbers = [column for column in table.columns if column not in ("setting", "backend")]
    # the phe backend's rows carry no CPU seconds: the benchmark did not measure them there
    display(
        table.style.hide(axis="index").format(
            partial(readable_number, missing="not measured"), subset=numbers
        )
    )
    show_captioned(
        protocol_scale_figure(document),
        "Protocol 1's seconds per round on the paper's artificial grid (parameters, users, silos), per "
        "backend and side (log scale): compare the two backends' server lines along each axis.",
    )
    display(Markdown(protocol_scale_sentences(document)))


def show_stored_runtime() -> None:
    """Display the committed paper-profile protocol-runtime runs (Figure 10's grid): the seconds per part of the
    protocol (:func:`uldp.paper.plots.runtime_table`), then per dataset and user count the encrypted weighting against
    the
    local training, and the server's round against a silo's; or say that none are committed."""
    stored = experiments.load_results("protocol_runtime", "paper")
    if not stored.runs:
        print("no committed protocol_runtime results in this checkout")
        return
    table = plots.runtime_table(stored)
    shown = table[
        [
            "parameters",
            "local training per silo",
            "encrypted weighting per silo",
            "aggregation",
            "key set-up",
            "blinded histogram",
        ]
    ]
    display(
        shown.reset_index()
        .rename(columns={column: f"{column} (s)" for column in shown.columns[1:]})
        .style.hide(axis="index")
        .format(precision=3)
        .format("{:,.0f}", subset=["parameters"])
    )
    lines = [
        f"- {dataset}, {users} users: local training {row['local training per silo']:.2f} s and encrypted "
        f"weighting {row['encrypted weighting per silo']:.2f} s per silo (the weighting "
        f"{row['encrypted weighting per silo'] / row['local training per silo']:.1f}x the training); the server "
        f"{row['aggregation']:.2f} s per round "
        f"({'more' if row['aggregation'] > row['training per silo'] else 'less'} than a silo's "
        f"{row['training per silo']:.2f} s)"
        for (dataset, users), row in table.iterrows()
    ]
    display(Markdown("\n".join(lines)))
