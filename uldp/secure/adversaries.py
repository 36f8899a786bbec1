"""Adversary by adversary, what each party beyond the paper's semi-honest server learns of a secure ULDP-AVG-w run
and which user-level epsilon still holds against it (issue 41 item 6; the protocol chapter renders the rows).

The epsilons come from the library's accountants (:func:`uldp.accounting.epsilon_for_method`,
:func:`uldp.accounting.epsilon_server_view`), at the run's sigma, rounds, delta and user sampling rate q:

- A server that sees the user sample (it draws it, or a silo that knows it tells it) gets the known-sample epsilon
  (:attr:`~uldp.accounting.Adversary.SERVER_SEES_SAMPLE`); one that may choose it, the epsilon at ``q = 1``
  (:attr:`~uldp.accounting.Adversary.SERVER_CHOOSES_SAMPLE`); one that never learns it, Lemma 4's amplified epsilon
  (:attr:`~uldp.accounting.Adversary.MODEL_READERS`, :mod:`uldp.secure.sampling`).
- A malicious server without the silos' roster swaps the DH keys it relays (:mod:`uldp.secure.roster`) and so
  unmasks every silo's update, whose noise is its share ``sigma C / sqrt(|S|)`` against a weight up to 1: the
  epsilon of :func:`uldp.accounting.epsilon_server_view`, at ``q = 1`` (in the middle of the pairwise keys it also
  sits in the middle of the sample's seed).
- ``t`` silos colluding with the server remove their own noise shares: with the paper's shares the honest noise
  has multiplier ``sigma sqrt((|S| - t) / |S|)``; with a policy threshold ``colluders >= t`` each share is scaled
  (:func:`uldp.policy.collusion_scale`) and sigma holds. A colluding silo knows the silos' sample, so the server
  then knows it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from uldp.accounting import Adversary, epsilon_for_method, epsilon_server_view
from uldp.common.checks import check_delta, check_integer, check_positive, check_rate

#: The method the rows describe: Protocol 1's (the enhanced weights computed without any n_su).
METHOD = "ULDP-AVG-w"


@dataclass(frozen=True)
class AdversaryRow:
    """One adversary of the table.

    Attributes:
        adversary: Who, in words.
        sample: Who draws the user sample: ``"server"`` or ``"silos (hidden)"``.
        roster: Whether the silos hold their roster (``uldp-identity``/``uldp-roster``); None where it does not
            matter (a server that follows the protocol).
        colluders: The silos' policy collusion threshold the row assumes.
        learns: What the adversary learns, in words.
        epsilon: The user-level epsilon that holds against it.
    """

    adversary: str
    sample: str
    roster: bool | None
    colluders: int
    learns: str
    epsilon: float


def adversary_rows(
    *, sigma: float, rounds: int, delta: float, q: float, n_silos: int, colluders: int
) -> list[AdversaryRow]:
    """The table's rows for a run at ``sigma``, ``rounds``, ``delta`` and user sampling rate ``q`` over ``n_silos``
    silos, ``colluders`` (t) of which collude with the server in the last rows (see the module docstring).

    Args:
        sigma: The run's noise multiplier.
        rounds: Its rounds.
        delta: Its delta.
        q: Its user sampling rate (Algorithm 4).
        n_silos: |S|.
        colluders: t, in ``1 .. |S| - 1``.

    Returns:
        The rows: a semi-honest server, a malicious server without and with a roster, one colluding silo and t
        colluding silos (with the paper's shares and with the policy's threshold), each with the sample drawn by
        the server and by the silos.

    Raises:
        ValueError: a value out of range, naming it.
    """
    check_positive("sigma", sigma)
    check_integer("rounds", rounds, minimum=1)
    check_delta(delta)
    check_rate("q", q)
    check_integer("n_silos", n_silos, minimum=2)
    check_integer("colluders", colluders, minimum=1, maximum=n_silos - 1)

    def model(noise: float, adversary: Adversary) -> float:
        return epsilon_for_method(
            METHOD, sigma=noise, rounds=rounds, delta=delta, q=q, adversary=adversary
        ).epsilon

    unmasked = epsilon_server_view(
        sigma=sigma, rounds=rounds, delta=delta, n_silos=n_silos, q=1.0
    ).epsilon
    rows = []
    for hidden in (False, True):
        sample = "silos (hidden)" if hidden else "server"
        server_sample = Adversary.MODEL_READERS if hidden else Adversary.SERVER_SEES_SAMPLE
        chosen = Adversary.MODEL_READERS if hidden else Adversary.SERVER_CHOOSES_SAMPLE
        sees = "the decoded noisy sum, B(N_u), sizes" + ("" if hidden else ", the sample")
        rows += [
            AdversaryRow("semi-honest server", sample, None, 0, sees, model(sigma, server_sample)),
            AdversaryRow(
                "malicious server",
                sample,
                False,
                0,
                "every silo's update (it swaps the relayed DH keys), the sample",
                unmasked,
            ),
            AdversaryRow(
                "malicious server",
                sample,
                True,
                0,
                sees + "; a swapped key or inflated weight is refused, it can stop the run",
                model(sigma, chosen),
            ),
        ]
        for t in sorted({1, colluders}):
            who = f"semi-honest server and {t} colluding silo{'' if t == 1 else 's'}"
            learns = "the sum of the honest silos' updates, the colluders' records and the sample"
            honest = sigma * math.sqrt((n_silos - t) / n_silos)
            known = Adversary.SERVER_SEES_SAMPLE
            rows += [
                AdversaryRow(who, sample, None, 0, learns, model(honest, known)),
                AdversaryRow(who, sample, None, t, learns, model(sigma, known)),
            ]
    return rows
