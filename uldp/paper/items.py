"""The paper's numbered items that the book discusses, where the library implements each and which chapters treat it.

Numbers and names follow the paper's own numbering (``uldp-fl.tex``): its sections, definitions, proposition,
lemmas, theorems, algorithms, protocol, equations, figures and tables. The book's page "The paper's numbered items"
renders :data:`ITEMS` with one MyST target per item (:attr:`PaperItem.label`), and every chapter links to the items
it mentions with ``{ref}`Lemma 3 <paper-lemma-3>` ``. ``tests/test_paper_items.py`` checks every number and name
against the tex, every implementation against the library, and every chapter list against the chapters' links.

Example:
    >>> lemma = next(item for item in ITEMS if item.kind == "lemma" and item.number == "4")
    >>> lemma.name, lemma.label
    ('Lemma 4', 'paper-lemma-4')
"""

from __future__ import annotations

from uldp.paper.paper_item import KINDS, PaperItem, shown_name

__all__ = ["ITEMS", "KINDS", "PaperItem", "markdown", "shown_name"]


_RDP = "uldp.accounting.rdp"
_GROUP = "uldp.accounting.group"
_METHODS = "uldp.accounting.methods"
_FIGURES = (
    "uldp.paper.plots.privacy_utility_figure",
    "uldp.paper.experiments.GRIDS",
    "uldp.paper.scorecard.CLAIMS",
)

ITEMS: tuple[PaperItem, ...] = (
    PaperItem(
        "section",
        "1",
        "Introduction",
        "Why record-level privacy under-protects people whose records sit in several silos.",
        (),
    ),
    PaperItem(
        "section",
        "2",
        "Background & Preliminaries",
        "Cross-silo federated learning and the differential-privacy tools the methods are built from.",
        (),
        ("book/introduction",),
    ),
    PaperItem(
        "section",
        "2.2",
        "Differential Privacy",
        "DP, Renyi DP, their composition and conversion, the Gaussian mechanism and group privacy.",
        (_RDP, _GROUP),
        ("book/introduction",),
    ),
    PaperItem(
        "section",
        "3",
        "ULDP-FL Framework",
        "The trust model, the user-level privacy definition and the four private training methods.",
        ("uldp.methods",),
        ("book/introduction",),
    ),
    PaperItem(
        "section",
        "3.1",
        "Trust model and Assumptions",
        "Silos and server are honest but curious; the silos share users' identities privately.",
        ("uldp.deploy",),
        ("book/deploying", "book/protocol_in_practice"),
    ),
    PaperItem(
        "section",
        "3.2",
        "Privacy definition",
        "Neighbouring federations differ in all of one user's records, in every silo.",
        ("uldp.audit",),
        ("book/auditing",),
    ),
    PaperItem(
        "section",
        "3.3",
        "Baseline methods: ULDP-NAIVE/GROUP",
        "The two baselines: noise calibrated to all silos, or record caps plus group privacy.",
        ("uldp.methods.fedavg", "uldp.methods.group"),
        ("book/baselines", "book/introduction"),
    ),
    PaperItem(
        "section",
        "3.4",
        "Advanced methods: ULDP-AVG/SGD",
        "Per-user, per-silo clipping with weights summing to one per user, and user sub-sampling.",
        ("uldp.methods.uldp_avg",),
        ("book/introduction", "book/uldp_avg_sgd"),
    ),
    PaperItem(
        "section",
        "4",
        "Enhanced Weighting and Private weighting protocol",
        "Weights proportional to a user's records in each silo, computed without revealing the counts.",
        ("uldp.secure",),
        ("book/introduction", "book/weighting_protocol"),
    ),
    PaperItem(
        "section",
        "5",
        "Experiments",
        "Privacy-utility trade-offs on four datasets, the weighting and sampling studies, and run times.",
        ("uldp.paper.experiments",),
        ("book/introduction", "book/settings"),
    ),
    PaperItem(
        "section",
        "5.1",
        "Settings",
        "Datasets, models, how records are allocated to users and silos, and the hyper-parameters.",
        ("uldp.data.allocation.allocate", "uldp.paper.experiments.PRIVACY_UTILITY"),
        ("book/differences", "book/users_across_silos"),
    ),
    PaperItem(
        "section",
        "5.2",
        "Results",
        "The experimental claims that the Scorecard chapter checks one by one.",
        ("uldp.paper.scorecard.CLAIMS",),
        ("book/introduction", "book/protocol_in_practice", "book/scorecard"),
    ),
    PaperItem(
        "section",
        "6",
        "Conclusion",
        "Summary of the contributions and the open questions the authors leave.",
        (),
        ("book/auditing",),
    ),
    PaperItem(
        "definition",
        "1",
        r"$(\epsilon, \delta)$-DP",
        "Neighbouring inputs differing in one record give output distributions within e^epsilon, up to delta.",
        ("uldp.audit.estimators.many_run_bound",),
    ),
    PaperItem(
        "definition",
        "2",
        r"$(\alpha, \rho)$-RDP",
        "Privacy as a bound on the Renyi divergence of order alpha between neighbouring outputs.",
        (f"{_RDP}.rdp_gaussian",),
    ),
    PaperItem(
        "definition",
        "3",
        r"$(k,\epsilon, \delta)$-GDP",
        "DP for inputs that differ in up to k records instead of one.",
        (f"{_GROUP}.group_privacy_table",),
    ),
    PaperItem(
        "definition",
        "4",
        r"$(\epsilon, \delta)$-User-Level DP (ULDP)",
        "DP for federations that differ in every record of one user, across all silos.",
        (f"{_METHODS}.epsilon_for_method", "uldp.audit.crafted.claimed_epsilon"),
    ),
    PaperItem(
        "definition",
        "5",
        "Sensitivity",
        "The largest change of a function's output between neighbouring inputs.",
        ("uldp.methods.uldp_avg.check_weights",),
    ),
    PaperItem(
        "proposition",
        "1",
        "GDP with k at least every user's record count gives ULDP",
        "Group privacy at the largest number of records per user is user-level privacy.",
        (f"{_METHODS}.epsilon_group", "uldp.methods.group.resolve_group_size"),
    ),
    PaperItem(
        "lemma",
        "1",
        "RDP composition",
        "Running RDP mechanisms one after the other adds their RDP costs at each order.",
        (f"{_RDP}.rdp_subsampled_gaussian",),
        ("book/bibliography",),
    ),
    PaperItem(
        "lemma",
        "2",
        "RDP to DP conversion",
        "Turns an RDP cost at one order into an (epsilon, delta) guarantee; the best order is taken.",
        (f"{_RDP}.rdp_to_dp",),
        ("book/bibliography", "book/group_privacy", "book/tighter_accounting"),
    ),
    PaperItem(
        "lemma",
        "3",
        "RDP Gaussian mechanism",
        "Gaussian noise of scale sigma times the sensitivity costs alpha / (2 sigma^2) at order alpha.",
        (f"{_RDP}.rdp_gaussian",),
        ("book/bibliography",),
    ),
    PaperItem(
        "lemma",
        "4",
        "RDP for sub-sampled Gaussian mechanism",
        "Sampling the input with rate q before the Gaussian mechanism lowers its RDP cost.",
        (f"{_RDP}.rdp_subsampled_gaussian",),
        ("book/bibliography", "book/exp_user_sampling", "book/uldp_avg_sgd"),
    ),
    PaperItem(
        "lemma",
        "5",
        "Group privacy conversion (record-level DP to GDP)",
        "An (epsilon, delta)-DP mechanism protects groups of k records at k epsilon and a grown delta.",
        (f"{_GROUP}.group_dp_epsilon",),
        ("book/group_privacy", "book/introduction", "book/settings", "book/tighter_accounting"),
    ),
    PaperItem(
        "lemma",
        "6",
        "Group-privacy of RDP (record-level DP to GDP)",
        "RDP for groups of k records at a lower order and a multiplied cost; valid only at high orders.",
        (
            f"{_GROUP}.group_rdp_epsilon",
            f"{_GROUP}.paper_group_rdp_epsilon",
            "uldp.paper.errata.ERRATA",
        ),
        (
            "book/bibliography",
            "book/differences",
            "book/exp_mnist",
            "book/group_privacy",
            "book/settings",
            "book/tighter_accounting",
        ),
    ),
    PaperItem(
        "theorem",
        "1",
        "Privacy of ULDP-NAIVE",
        "ULDP-NAIVE's user-level epsilon: one Gaussian mechanism per round, composed over the rounds.",
        (f"{_METHODS}.epsilon_naive", "uldp.methods.fedavg.FedAvgMethod"),
        ("book/auditing", "book/baselines", "book/differences", "book/tighter_accounting"),
    ),
    PaperItem(
        "theorem",
        "2",
        "Privacy of ULDP-GROUP-k",
        "ULDP-GROUP-k's user-level epsilon: silo-level DP-SGD turned into group privacy for k records.",
        (f"{_METHODS}.epsilon_group", "uldp.methods.group.GroupMethod"),
        (
            "book/auditing",
            "book/baselines",
            "book/settings",
            "book/tighter_accounting",
            "book/your_own_silos",
        ),
    ),
    PaperItem(
        "theorem",
        "3",
        "Privacy of ULDP-AVG and ULDP-SGD",
        "The proposed methods cost what one Gaussian mechanism per round costs, whatever a user's records.",
        (f"{_METHODS}.epsilon_uldp", "uldp.methods.uldp_avg.UserLevelMethod"),
        ("book/auditing", "book/tighter_accounting", "book/uldp_avg_sgd", "book/your_own_silos"),
    ),
    PaperItem(
        "theorem",
        "4",
        "Correctness of Protocol 1",
        "The securely aggregated update equals the plain one to within the precision P, with high probability.",
        ("uldp.secure.encoding.resolution_bits_for", "uldp.secure.encoding.check_no_wraparound"),
        ("book/deploying", "book/differences", "book/weighting_protocol", "book/your_own_silos"),
    ),
    PaperItem(
        "theorem",
        "5",
        "Privacy of Protocol 1",
        "No party learns another silo's per-user record counts from the protocol's messages.",
        ("uldp.secure.protocol", "uldp.secure.masks"),
    ),
    PaperItem(
        "theorem",
        "6",
        "Convergence analysis on ULDP-AVG",
        "Under smoothness and bounded-variance assumptions ULDP-AVG's gradient norm shrinks with the rounds.",
        (),
    ),
    PaperItem(
        "algorithm",
        "1",
        "ULDP-NAIVE",
        "Each silo clips its whole model delta and adds noise sized for a user present in every silo.",
        ("uldp.methods.fedavg.FedAvgMethod",),
        (
            "book/baselines",
            "book/differences",
            "book/introduction",
            "book/scorecard",
            "book/settings",
            "book/uldp_avg_sgd",
        ),
    ),
    PaperItem(
        "algorithm",
        "2",
        "ULDP-GROUP-$k$",
        "Keep at most k records per user (private flags), then record-level DP-SGD in every silo.",
        (
            "uldp.methods.group.GroupMethod",
            "uldp.methods.group.contribution_flags",
            "uldp.training.dpsgd.dpsgd_train",
        ),
        ("book/baselines", "book/introduction"),
    ),
    PaperItem(
        "algorithm",
        "3",
        "ULDP-AVG / ULDP-SGD",
        "Train one model delta per user in each silo, clip it, weight it, sum, and add noise per silo.",
        ("uldp.methods.uldp_avg.UserLevelMethod", "uldp.training.per_user.train_users"),
        ("book/differences", "book/introduction", "book/uldp_avg_sgd", "book/your_own_silos"),
    ),
    PaperItem(
        "algorithm",
        "4",
        "ULDP-AVG with user-level sub-sampling",
        "ULDP-AVG where each round keeps a Poisson sample of users and zeroes the others' weights.",
        ("uldp.methods.uldp_avg.UserLevelMethod.sample_users", f"{_METHODS}.epsilon_uldp"),
        (
            "book/auditing",
            "book/deploying",
            "book/differences",
            "book/exp_user_sampling",
            "book/introduction",
            "book/settings",
            "book/uldp_avg_sgd",
            "book/your_own_silos",
        ),
    ),
    PaperItem(
        "algorithm",
        "5",
        r"\textsc{Encode} and \textsc{Decode}",
        "Fixed-point encoding of real values and weights into the protocol's finite field, and back.",
        ("uldp.secure.encoding.encode", "uldp.secure.encoding.decode"),
        ("book/differences", "book/weighting_protocol"),
    ),
    PaperItem(
        "protocol",
        "1",
        "Private Weighting Protocol",
        "Silos learn blinded user histograms and aggregate enhanced-weighted updates under Paillier and masks.",
        (
            "uldp.secure.SecureSession",
            "uldp.federation.SecureAggregator",
            "uldp.flower.UldpStrategy",
            "uldp.deploy",
        ),
        (
            "book/auditing",
            "book/deploying",
            "book/exp_user_sampling",
            "book/exp_weighting",
            "book/introduction",
            "book/protocol_in_practice",
            "book/uldp_avg_sgd",
            "book/weighting_protocol",
            "book/your_own_silos",
        ),
    ),
    PaperItem(
        "equation",
        "3",
        "the enhanced weights",
        "A user's weight in a silo is that silo's share of the user's records.",
        ("uldp.methods.uldp_avg.enhanced_weights",),
        ("book/uldp_avg_sgd", "book/your_own_silos"),
    ),
    PaperItem(
        "figure",
        "1",
        "In cross-silo FL, records belonging to the same user can exist across silos",
        "The setting: one person holds records in several institutions that train together.",
        (),
    ),
    PaperItem(
        "figure",
        "2",
        "Group-privacy conversion results",
        "Record-level DP-SGD's epsilon for groups of k records grows fast with k.",
        (
            f"{_GROUP}.group_privacy_table",
            "uldp.paper.plots.group_privacy_figure",
            "uldp.paper.errata.figure2_erratum",
        ),
        ("book/differences", "book/group_privacy", "book/introduction", "book/settings"),
    ),
    PaperItem(
        "figure",
        "3",
        "An intuitive illustration of the difference between ULDP-NAIVE and ULDP-AVG",
        "Per-user clipping with weights limits one user's share of the update, hence the noise needed.",
        (),
        ("book/uldp_avg_sgd",),
    ),
    PaperItem(
        "figure",
        "4",
        "Privacy-utility trade-offs on Creditcard dataset",
        "Accuracy and user-level epsilon per round for every method on Creditcard.",
        _FIGURES,
        (
            "book/differences",
            "book/exp_creditcard",
            "book/exp_mnist",
            "book/reproducibility",
            "book/scorecard",
            "book/settings",
        ),
    ),
    PaperItem(
        "figure",
        "5",
        "Privacy-utility trade-offs on MNIST dataset",
        "Loss, accuracy and epsilon per round on MNIST, with 100 and 10,000 users.",
        _FIGURES,
        (
            "book/differences",
            "book/exp_creditcard",
            "book/exp_mnist",
            "book/reproducibility",
            "book/scorecard",
            "book/settings",
        ),
    ),
    PaperItem(
        "figure",
        "6",
        "HeartDisease",
        "The same trade-off on FLamby's HeartDisease, four hospitals.",
        _FIGURES,
        (
            "book/differences",
            "book/exp_creditcard",
            "book/exp_heart_disease",
            "book/exp_mnist",
            "book/introduction",
            "book/reproducibility",
            "book/scorecard",
            "book/settings",
        ),
    ),
    PaperItem(
        "figure",
        "7",
        "TcgaBrca",
        "The same trade-off on FLamby's TCGA-BRCA survival data, scored by the C-index.",
        _FIGURES,
        (
            "book/differences",
            "book/exp_creditcard",
            "book/exp_mnist",
            "book/exp_tcga_brca",
            "book/reproducibility",
            "book/scorecard",
            "book/settings",
        ),
    ),
    PaperItem(
        "figure",
        "8",
        "Test loss of Creditcard: Weighting method is effective",
        "Enhanced weights against uniform ones, most useful when users are spread unevenly over many silos.",
        ("uldp.paper.plots.weighting_figure", "uldp.paper.scorecard.weighting_gaps"),
        ("book/exp_weighting", "book/reproducibility", "book/settings"),
    ),
    PaperItem(
        "figure",
        "9",
        "User-level sub-sampling achieves a more competitive privacy-utility trade-off",
        "Sampling fewer users per round at the same budget, across sampling rates.",
        ("uldp.paper.plots.user_sampling_figure",),
        ("book/exp_mnist", "book/exp_user_sampling", "book/reproducibility", "book/settings"),
    ),
    PaperItem(
        "figure",
        "10",
        "With a small model, the private weighting protocol has a practical execution time",
        "Time per part of Protocol 1 on the medical datasets' small models.",
        ("uldp.paper.plots.runtime_figure", "uldp.paper.scorecard_runtime.runtime_parts"),
        (
            "book/differences",
            "book/exp_weighting",
            "book/reproducibility",
            "book/settings",
            "book/weighting_protocol",
        ),
    ),
    PaperItem(
        "figure",
        "11",
        "The dominant execution time grows linearly with parameter size",
        "Protocol 1's time as the model and the number of users grow.",
        (
            "uldp.secure.scan.protocol_scan",
            "uldp.paper.scorecard_runtime.fit_growth",
            "uldp.paper.scorecard_runtime.runtime_linear",
        ),
        ("book/reproducibility", "book/settings", "book/weighting_protocol"),
    ),
    PaperItem(
        "figure",
        "12",
        "Example of record allocation on Creditcard",
        "How the allocation schemes spread one dataset's records over users and silos.",
        ("uldp.data.allocation.allocate", "uldp.data.allocation.summary"),
    ),
    PaperItem(
        "table",
        "1",
        "Notation Table for Algorithms",
        "The symbols of the algorithms: silos, users, rounds, rates, clipping bound, noise multiplier.",
        ("uldp.methods.base.Hyperparameters", "uldp.methods.base.Federation"),
    ),
    PaperItem(
        "table",
        "2",
        "Comparison of Existing Differential Privacy Variants in Federated Learning",
        "Where user-level, cross-silo DP sits among the privacy notions of earlier federated learning work.",
        (),
    ),
)


def markdown(*kinds: str) -> str:
    """MyST markdown for the items of ``kinds``: per item its target, number, name, summary, code and chapters.

    Args:
        kinds: Kinds of :data:`KINDS`; the items are listed in the order of :data:`ITEMS`.

    Returns:
        One paragraph per item, each preceded by its ``(label)=`` target so that chapters can link to it.

    Raises:
        ValueError: If a kind is not one of :data:`KINDS`.
    """
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    blocks = []
    for item in ITEMS:
        if item.kind not in kinds:
            continue
        code = ", ".join(f"`{name}`" for name in item.implemented_by) or "nothing to compute"
        chapters = ", ".join(f"{{doc}}`/{chapter}`" for chapter in item.chapters) or "none"
        blocks.append(
            f"({item.label})=\n**{item.name}** ({shown_name(item.title)}). {item.summary}  \n"
            f"In `uldp`: {code}. Chapters: {chapters}."
        )
    return "\n\n".join(blocks)
