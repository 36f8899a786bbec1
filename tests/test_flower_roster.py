"""uldp.flower with issue 41's silo defences: the silos' roster authenticates the DH keys the server relays (item 3),
and a silo whose policy asks for a malicious server's guarantee needs its roster and refuses the lattice backend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from flower_hospitals import (  # noqa: F401  (hospital_files: a fixture)
    ALLOW_TEST_KEYS,
    HOSPITALS,
    INSECURE_SEED_5,
    LAX,
    TEST_KEYS,
    hospital_files,
    load,
    model,
    node_configs,
)
from torch import nn

import uldp
import uldp.flower as uf
from uldp.flower.local import LocalGrid
from uldp.flower.secure import IDENTITY_KEY, ROSTER_KEY
from uldp.secure.keys import new_dh_private_key
from uldp.secure.messages import DhDirectoryMessage
from uldp.secure.roster import Roster, write_identity, write_roster

if TYPE_CHECKING:
    import pathlib

#: The roster's name of each hospital (a roster name has no spaces); the roster lists them in the federation's
#: order, the hospitals' sorted names.
ROSTER_NAMES = {h: h.replace(" ", "-") for h in HOSPITALS}
#: The directory stage of each secure aggregation, and the slot whose key the server swaps there.
DIRECTORY_STAGES = ("sum-directory", "p1-directory")
SWAPPED = 1


def rosters(files: pathlib.Path) -> dict[str, dict[str, str]]:
    """Per hospital, the node config naming its identity and its copy of the roster (the same entries)."""
    identities = {
        h: write_identity(files / f"{h}.identity.json", ROSTER_NAMES[h]) for h in sorted(HOSPITALS)
    }
    roster = Roster.of(identities[h] for h in sorted(HOSPITALS))
    configs = {}
    for h in HOSPITALS:
        write_roster(files / f"{h}.roster.json", roster)
        configs[h] = {
            IDENTITY_KEY: str(files / f"{h}.identity.json"),
            ROSTER_KEY: str(files / f"{h}.roster.json"),
        }
    return configs


class SwappingKey(uf.UldpStrategy):
    """A server in the middle of silo :data:`SWAPPED` and every other silo: it relays silo SWAPPED its own directory
    and the others one with a DH key of the server's in slot SWAPPED (issue 41 attack 3)."""

    def _ask(self, grid, contents, timeout, **options):
        for node, content in contents.items():
            if content.get("stage") in DIRECTORY_STAGES and node != self.nodes[SWAPPED]:
                payloads = [bytes(p) for p in content["payloads"]]
                directory = DhDirectoryMessage.from_bytes(payloads[0])
                keys = list(directory.public_keys)
                keys[SWAPPED] = new_dh_private_key().public_key().public_bytes_raw()
                payloads[0] = DhDirectoryMessage(tuple(keys), directory.attestations).to_bytes()
                content["payloads"] = payloads
        return super()._ask(grid, contents, timeout, **options)


def run(
    files: pathlib.Path,
    node_config: dict[str, Any],
    per_silo: dict[str, dict[str, str]] | None = None,
    *,
    strategy_class: type[uf.UldpStrategy] = uf.UldpStrategy,
    rounds: int = 1,
    initial: np.ndarray | None = None,
    **arguments: Any,
) -> np.ndarray:
    """A Flower run on LocalGrid from ``initial`` (default: a new model's parameters); every silo's node config is
    ``node_config`` and its own ``per_silo`` entry."""
    from flwr.app import ArrayRecord

    configs = [
        {**c, **(per_silo or {}).get(c["silo"], {})}
        for c in node_configs(files, {**LAX, **node_config})
    ]
    grid = LocalGrid(uf.silo_client_app(load, model, nn.CrossEntropyLoss()), configs)
    if initial is None:
        initial = uldp.flat_parameters(model()).numpy()
    result = strategy_class(**arguments).start(grid, ArrayRecord([initial]), num_rounds=rounds)
    return result.arrays.to_numpy_ndarrays()[0]


#: The hospital in slot SWAPPED of the roster, as its attestation names it.
SWAPPED_NAME = ROSTER_NAMES[sorted(HOSPITALS)[SWAPPED]]
MASKED_SUM_RUN: dict[str, Any] = dict(
    method="ULDP-AVG", sigma=1.0, q=1.0, local_epochs=1, batch_size=8
)
PROTOCOL_1_RUN: dict[str, Any] = dict(
    method="ULDP-AVG-w", sigma=5.0, local_epochs=1, protocol=TEST_KEYS
)


@pytest.mark.parametrize("settings", [MASKED_SUM_RUN, PROTOCOL_1_RUN], ids=["masked-sum", "p1"])
def test_a_swapped_relayed_key_is_refused_naming_the_silo(hospital_files, settings):
    """Attack 3 end to end: the server relays every silo but silo 1 a directory with its own key in silo 1's slot
    (uldp.secure's tests show that it then unmasks silo 1's update). With rosters every silo checks the directory
    before it derives a pairwise key, and the run stops naming the silo whose key was swapped."""
    allow = ALLOW_TEST_KEYS if "protocol" in settings else {}
    with pytest.raises(
        RuntimeError,
        match=rf"silo {SWAPPED} \({SWAPPED_NAME}\): its relayed DH key is not signed by its roster identity",
    ):
        run(
            hospital_files,
            allow,
            rosters(hospital_files),
            strategy_class=SwappingKey,
            **settings,
        )


def test_an_honest_run_with_rosters_equals_the_run_without(hospital_files):
    """The roster only authenticates: the masked sum's model with rosters is the model without them (same test
    noise, q = 1), and the honest relay passes every silo's check."""
    initial = uldp.flat_parameters(model()).numpy()
    settings = {**MASKED_SUM_RUN, "rounds": 2, "initial": initial}
    plain = run(hospital_files, INSECURE_SEED_5, **settings)
    with_rosters = run(hospital_files, INSECURE_SEED_5, rosters(hospital_files), **settings)
    np.testing.assert_allclose(with_rosters, plain, rtol=1e-5, atol=1e-6)
    assert np.abs(plain - initial).max() > 1e-2  # the runs trained


def test_a_malicious_server_policy_needs_a_roster(hospital_files):
    """A silo that asks for a malicious server's guarantee (``uldp-policy-malicious-server=true``) starts no secure
    session with unauthenticated keys; with its roster it runs."""
    strict = {"uldp-policy-malicious-server": "true"}
    with pytest.raises(
        RuntimeError, match=r"starts no secure session without its identity and roster"
    ):
        run(hospital_files, strict, **MASKED_SUM_RUN)
    assert np.isfinite(run(hospital_files, strict, rosters(hospital_files), **MASKED_SUM_RUN)).all()


@pytest.mark.parametrize(
    "asked", [{"uldp-policy-malicious-server": "true"}, {}], ids=["said", "default"]
)
def test_a_malicious_server_policy_refuses_the_lattice_backend(hospital_files, asked):
    """Issue 41 item 4 on Flower: the lattice backend cannot check the weights the server encrypts, so a silo whose
    policy asks for a malicious server's guarantee refuses it at Protocol 1's first stage (the Paillier backend,
    whose weights the silos check, is what it accepts: the swapped-key test above runs it to its directory). A
    silo that names its roster asks for it by default."""
    with pytest.raises(
        RuntimeError, match=r"refuses the lattice backend: its policy asks for a guarantee"
    ):
        run(
            hospital_files,
            {**ALLOW_TEST_KEYS, **asked},
            rosters(hospital_files),
            method="ULDP-AVG-w",
            sigma=5.0,
            local_epochs=1,
            protocol={**TEST_KEYS, "backend": "lattice"},
        )


@pytest.mark.parametrize(
    ("config", "refusal"),
    [
        ({"uldp-policy-malicious-server": "yes"}, r"must be true or false, got 'yes'"),
        ({IDENTITY_KEY: "/nowhere/identity.json"}, r"uldp-identity and uldp-roster: a roster file"),
    ],
)
def test_a_bad_trust_setting_is_refused_by_name(hospital_files, config, refusal):
    with pytest.raises(RuntimeError, match=refusal):
        run(hospital_files, config, **MASKED_SUM_RUN)


class SentSpy(LocalGrid):
    """LocalGrid that keeps every message the server sends."""

    sent: list

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        self.sent.extend(messages)
        return super().send_and_receive(messages, timeout=timeout)


def test_with_the_silos_sampler_each_silo_trains_on_the_sample_the_server_never_sees(
    hospital_files, monkeypatch
):
    """Issue 41 item 1 on Flower: with ``uldp-policy-sampler=silos`` (q from the silo's policy) and the strategy's
    ``hidden_sample``, every silo trains on the sample the silos drew from their session's seed (the same at every
    silo, about q |U| users), the server's train messages name every user as sampled, and the decoded aggregate is
    the plain sum of the silos' updates over that sample; the server's view is then charged as amplified."""
    from flwr.app import ArrayRecord

    from uldp.accounting import epsilon_for_method
    from uldp.federation.aggregation import MaskedSumAggregation
    from uldp.flower.messages import config_of
    from uldp.flower.secure import silo_sample
    from uldp.method_names import MASKED_SUM
    from uldp.methods.uldp_avg import UserLevelMethod
    from uldp.policy import SiloLedger, SiloPolicy

    honest = UserLevelMethod.silo_update
    used: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def spy_update(self, params, federation, round_seed, silo_id, *, sampled, counts):
        update = honest(
            self, params, federation, round_seed, silo_id, sampled=sampled, counts=counts
        )
        used[silo_id] = (sampled.copy(), update.detach().numpy().astype(np.float64))
        return update

    decoded: list[np.ndarray] = []
    finish = MaskedSumAggregation.finish_round

    def spy_finish(self, *args, **kwargs):
        decoded.append(finish(self, *args, **kwargs))
        return decoded[-1]

    monkeypatch.setattr(UserLevelMethod, "silo_update", spy_update)
    monkeypatch.setattr(MaskedSumAggregation, "finish_round", spy_finish)
    q = 0.5
    configs = node_configs(
        hospital_files, {**LAX, "uldp-policy-sampler": "silos", "uldp-policy-q": q}
    )
    grid = SentSpy(uf.silo_client_app(load, model, nn.CrossEntropyLoss()), configs)
    grid.sent = []
    strategy = uf.UldpStrategy(
        method="ULDP-AVG", sigma=1.0, q=q, local_epochs=1, batch_size=8, hidden_sample=True
    )
    strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)

    n_users = strategy.n_users
    samples = [silo_sample({"round": 1}, c, MASKED_SUM, n_users) for c in grid.contexts.values()]
    assert all(np.array_equal(s, samples[0]) for s in samples)  # one sample, agreed by the silos
    sample = samples[0]
    assert 0 < sample.sum() < n_users
    assert sorted(used) == [0, 1, 2]
    assert all(np.array_equal(sampled, sample) for sampled, _ in used.values())
    trains = [config_of(m) for m in grid.sent if m.metadata.message_type == "train"]
    assert len(trains) == 3
    every_user = np.packbits(np.ones(n_users, dtype=bool)).tobytes()
    assert all(t["sampled"] == every_user for t in trains)  # the server never names the sample
    plain_sum = sum(update for _, update in used.values())
    np.testing.assert_allclose(decoded[0], plain_sum, rtol=1e-6, atol=1e-6)
    # the server's view is amplified by the sample it never saw: the released model's epsilon
    assert strategy.server_view_epsilons == strategy.epsilons
    # and so is each silo's ledger (Theorem 3 with Lemma 4 at the policy's q; 4.73 at q = 1 where the server samples)
    amplified = epsilon_for_method("ULDP-AVG", sigma=1.0, rounds=1, delta=1e-5, q=q).epsilon
    known = epsilon_for_method("ULDP-AVG", sigma=1.0, rounds=1, delta=1e-5, q=1.0).epsilon
    for context in grid.contexts.values():
        config = context.node_config
        ledger = SiloLedger(SiloPolicy.from_node_config(config), str(config["uldp-ledger"]))
        spent = ledger.spent().epsilon
        assert spent == pytest.approx(amplified, rel=1e-9) and spent < known - 0.5


def test_the_silos_sampler_without_a_hidden_sample_is_refused(hospital_files):
    """A silo whose policy draws the sample itself never trains on the server's: a strategy that does not set up the
    silos' sample gets no round."""
    with pytest.raises(RuntimeError, match=r"no hidden sample"):
        run(
            hospital_files, {"uldp-policy-sampler": "silos", "uldp-policy-q": 0.5}, **MASKED_SUM_RUN
        )


def test_protocol_1_with_the_silos_sampler_trains_on_their_sample(hospital_files, monkeypatch):
    """The same on Protocol 1 (ULDP-AVG-w): each silo's per-user deltas are of the sample keyed by the session's seed
    R (the same at every silo), while the server encrypts every user's weight and names every user as sampled; the
    decoded aggregate is the plain weighted sum over that sample within P, and no server message carries it."""
    from flwr.app import ArrayRecord

    from uldp.federation import SiloRound
    from uldp.federation.aggregation import Protocol1Aggregation
    from uldp.flower.messages import config_of
    from uldp.flower.secure import silo_sample
    from uldp.method_names import PROTOCOL_1
    from uldp.methods.uldp_avg import UserLevelMethod

    honest = UserLevelMethod.silo_user_deltas
    used: dict[int, np.ndarray] = {}

    def spy(self, params, federation, round_seed, sampled, silo_id):
        used[silo_id] = np.asarray(sampled).copy()
        return honest(self, params, federation, round_seed, sampled, silo_id)

    inputs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    secure_inputs = SiloRound.secure_inputs

    def spy_inputs(self):
        inputs[self.silo.silo_id] = secure_inputs(self)
        return inputs[self.silo.silo_id]

    decoded: list[np.ndarray] = []
    finish = Protocol1Aggregation.finish_round

    def spy_finish(self, *args, **kwargs):
        decoded.append(finish(self, *args, **kwargs))
        return decoded[-1]

    monkeypatch.setattr(UserLevelMethod, "silo_user_deltas", spy)
    monkeypatch.setattr(SiloRound, "secure_inputs", spy_inputs)
    monkeypatch.setattr(Protocol1Aggregation, "finish_round", spy_finish)
    q = 0.5
    silos = {**LAX, **ALLOW_TEST_KEYS, "uldp-policy-sampler": "silos", "uldp-policy-q": q}
    grid = SentSpy(
        uf.silo_client_app(load, model, nn.CrossEntropyLoss()), node_configs(hospital_files, silos)
    )
    grid.sent = []
    strategy = uf.UldpStrategy(**{**PROTOCOL_1_RUN, "q": q}, hidden_sample=True)
    strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), num_rounds=1)
    samples = [
        silo_sample({"round": 1}, c, PROTOCOL_1, strategy.n_users) for c in grid.contexts.values()
    ]
    assert all(np.array_equal(s, samples[0]) for s in samples)
    assert 0 < samples[0].sum() < strategy.n_users
    assert sorted(used) == [0, 1, 2] and all(np.array_equal(s, samples[0]) for s in used.values())
    every_user = np.packbits(np.ones(strategy.n_users, dtype=bool)).tobytes()
    trains = [config_of(m) for m in grid.sent if m.metadata.message_type == "train"]
    assert len(trains) == 3 and all(t["sampled"] == every_user for t in trains)
    # the aggregate is the plain weighted sum over the silos' sample, sum_s (sum_u w_su Delta_su + z_s) with the
    # enhanced weights n_su / N_u of the sampled users (Theorem 4: within P of it), not over every user
    counts = np.zeros((3, strategy.n_users))
    for context in grid.contexts.values():
        index = int(context.state.config_records["uldp"]["index"])  # type: ignore[arg-type]  # an int there
        counts[index] = context.state.array_records["uldp_arrays"].to_numpy_ndarrays()[0][index]
    weights = np.where(samples[0], counts / counts.sum(axis=0), 0.0)
    exact = sum(weights[s] @ inputs[s][0] + inputs[s][1] for s in range(3))
    # (then rounded to the model's float32: one float32 rounding of each coordinate on top of P)
    precision = strategy.protocol.precision + np.finfo(np.float32).eps * np.abs(exact)
    assert len(decoded) == 1 and np.all(np.abs(decoded[0] - exact) <= precision)
    unsampled = ~samples[0]  # users outside the sample add nothing: no delta at any silo
    assert all(
        not inputs[s][0][unsampled].any() and inputs[s][0][~unsampled].any() for s in range(3)
    )
    # and no message of the server carries the sample: not as packed bits, a boolean or 0/1 list, nor its users
    sample = samples[0]
    forms = [np.packbits(sample).tobytes(), sample.tolist(), sample.astype(int).tolist()]
    forms.append(np.flatnonzero(sample).tolist())
    for message in grid.sent:
        for record in message.content.config_records.values():
            for value in record.values():
                assert not any(value == form for form in forms), message.metadata.message_type


@pytest.mark.parametrize("colluders", [1, 2])
def test_against_t_colluders_the_honest_silos_noise_shares_keep_the_runs_std(
    hospital_files, monkeypatch, colluders
):
    """Issue 41 item 6 on Flower: with ``uldp-policy-colluders=t`` each silo scales its noise share by
    sqrt(|S| / (|S| - t)), so the shares of the |S| - t honest silos alone sum to std sigma C (Theorem 3's noise),
    what every reported epsilon assumes; the run says against how many colluders it holds (the strategy, each
    round's metrics, each silo's ledger), and the server's bounds let the scaled shares through.

    Each Flower silo's own noise draw (the method it built from its node config), 200,000 coordinates per honest
    silo: the honest sum's sample variance over (sigma C)^2, times n, is chi-square with n degrees of freedom; it
    must lie in the two-sided 1e-6 interval (the paper's shares would give (|S| - t) / |S|, far outside it)."""
    from flwr.app import ArrayRecord
    from scipy import stats

    from uldp.methods.base import EveryRecordSiloNoise
    from uldp.policy import SiloLedger, SiloPolicy

    drew: dict[int, Any] = {}
    honest = EveryRecordSiloNoise.silo_noise

    def spy(self, size, n_silos, round_seed, silo, device=None):
        drew[silo] = self
        return honest(self, size, n_silos, round_seed, silo, device)

    monkeypatch.setattr(EveryRecordSiloNoise, "silo_noise", spy)
    sigma, n_silos, size = 2.0, len(HOSPITALS), 200_000
    configs = node_configs(hospital_files, {**LAX, "uldp-policy-colluders": str(colluders)})
    grid = LocalGrid(uf.silo_client_app(load, model, nn.CrossEntropyLoss()), configs)
    strategy = uf.UldpStrategy(**{**MASKED_SUM_RUN, "sigma": sigma, "clip": 1.0})
    result = strategy.start(grid, ArrayRecord([uldp.flat_parameters(model()).numpy()]), 1)
    assert sorted(drew) == [0, 1, 2] and all(m.colluders == colluders for m in drew.values())
    total = sum(
        drew[s].silo_noise(size, n_silos, np.random.SeedSequence(s), s).double().numpy()
        for s in range(
            colluders, n_silos
        )  # which silos collude does not matter: every share is scaled
    )
    n = size
    ratio = n * float(np.mean(total**2)) / sigma**2
    low, high = stats.chi2.ppf([0.5e-6, 1 - 0.5e-6], n)
    assert low <= ratio <= high
    paper = n * (n_silos - colluders) / n_silos
    assert not low <= paper <= high
    assert strategy.colluders == colluders
    assert result.train_metrics_clientapp[1]["colluders"] == colluders
    for context in grid.contexts.values():
        config = context.node_config
        ledger = SiloLedger(SiloPolicy.from_node_config(config), str(config["uldp-ledger"]))
        assert ledger.spent().colluders == colluders


def test_a_collusion_threshold_of_every_silo_is_refused_naming_the_silo(hospital_files):
    """t = |S| leaves no honest silo to add noise: refused at the set-up, naming the silo, before any round."""
    with pytest.raises(
        ValueError,
        match=r"silo 'General'.*collusion threshold of 3 silo\(s\); this federation has 3",
    ):
        run(hospital_files, {}, {"General": {"uldp-policy-colluders": "3"}}, **MASKED_SUM_RUN)


def test_every_epsilon_and_the_start_up_log_name_the_adversary(hospital_files, caplog):
    """Issue 41 item 4: on Flower a silo that names its identity and roster holds against a malicious server by
    default, one without them against a semi-honest server only, and says so when the run starts; the
    strategy's epsilons hold against the weakest silo's adversary."""
    import logging

    caplog.set_level(logging.INFO, logger="uldp")
    for per_silo, server in ((None, "semi-honest"), (rosters(hospital_files), "malicious")):
        caplog.clear()
        configs = [
            {**c, **(per_silo or {}).get(c["silo"], {})} for c in node_configs(hospital_files, LAX)
        ]
        grid = LocalGrid(uf.silo_client_app(load, model, nn.CrossEntropyLoss()), configs)
        strategy = uf.UldpStrategy(**MASKED_SUM_RUN)
        strategy.setup(grid)
        assert strategy.against == f"a {server} server with no silo colluding"
        said = [r for r in caplog.records if "every epsilon it reports holds against" in r.message]
        assert len(said) == 3 and all(f"against a {server} server" in r.message for r in said)
        assert all(("may swap the keys" in r.message) == (server == "semi-honest") for r in said)
        assert any(
            f"every epsilon of this run holds against a {server}" in r.message
            for r in caplog.records
        )


def test_a_run_that_needs_t_colluders_stops_naming_the_silos_whose_policy_says_fewer(
    hospital_files,
):
    """``UldpStrategy(min_colluders=t)`` (``uldp flower-run --colluders t``): the set-up stops before any round,
    naming the silos whose ``uldp-policy-colluders`` is below t; with every silo at t it runs."""
    per_silo = {"Royal": {"uldp-policy-colluders": "1"}, "St Mary": {"uldp-policy-colluders": "1"}}
    configs = [{**c, **per_silo.get(c["silo"], {})} for c in node_configs(hospital_files, LAX)]
    grid = LocalGrid(uf.silo_client_app(load, model, nn.CrossEntropyLoss()), configs)
    with pytest.raises(
        RuntimeError, match=r"silo\(s\) General hold against fewer than the run's min_colluders 1"
    ):
        uf.UldpStrategy(**MASKED_SUM_RUN, min_colluders=1).setup(grid)
    per_silo["General"] = {"uldp-policy-colluders": "1"}
    configs = [{**c, **per_silo.get(c["silo"], {})} for c in node_configs(hospital_files, LAX)]
    grid = LocalGrid(uf.silo_client_app(load, model, nn.CrossEntropyLoss()), configs)
    strategy = uf.UldpStrategy(**MASKED_SUM_RUN, min_colluders=1)
    strategy.setup(grid)
    assert strategy.colluders == 1 and strategy.against.endswith("colluding with up to 1 silo(s)")
