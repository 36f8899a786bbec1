"""Privacy accounting: RDP of the (sub-sampled) Gaussian, conversions, group privacy, each method's guarantee.

Pure functions with keyword-only privacy arguments. Two accountants, registered by name (:data:`ACCOUNTANTS`, each an
:class:`Accountant`): ``"rdp"``, the paper's (opacus' analysis; dp-accounting cross-checks it in the tests), and
``"pld"``, the tighter privacy-loss distribution of dp-accounting, with ULDP-GROUP-k accounted as a mixture of
Gaussians. With user sampling each epsilon names its :class:`Adversary`: the amplified one holds only against
whoever does not know the sample (:mod:`uldp.accounting.known_sample`). See :mod:`uldp.accounting.rdp`,
:mod:`uldp.accounting.pld`, :mod:`uldp.accounting.group`, :mod:`uldp.accounting.theorems` (one function per
theorem), :mod:`uldp.accounting.accountants` (the registry) and :mod:`uldp.accounting.methods` (each method's).
"""

from uldp.accounting.adversary import Adversary, check_adversary
from uldp.accounting.group import (
    GroupPrivacySpent,
    group_dp_epsilon,
    group_epsilon_bounds,
    group_privacy_table,
    group_rdp_epsilon,
    paper_group_dp_epsilon,
    paper_group_rdp_epsilon,
    power_of_two_bounds,
)
from uldp.accounting.known_sample import (
    epsilon_chosen_sample,
    epsilon_known_sample,
    epsilon_known_sample_pld,
    epsilon_known_sample_rdp,
    epsilon_of_participation,
)
from uldp.accounting.methods import (
    ACCOUNTANTS,
    Accountant,
    PldAccountant,
    RdpAccountant,
    check_accountant,
    epsilon_for_method,
    epsilon_group,
    epsilon_naive,
    epsilon_of_releases,
    epsilon_server_view,
    epsilon_uldp,
    sigma_for_budget,
    sigma_for_epsilon,
)
from uldp.accounting.pld import (
    epsilon_group_pld,
    epsilon_uldp_pld,
    gaussian_epsilon,
    mixture_group_curve,
)
from uldp.accounting.rdp import (
    DEFAULT_ORDERS,
    PrivacySpent,
    dp_epsilons,
    rdp_gaussian,
    rdp_subsampled_gaussian,
    rdp_to_dp,
)

__all__ = [
    "ACCOUNTANTS",
    "DEFAULT_ORDERS",
    "Accountant",
    "Adversary",
    "GroupPrivacySpent",
    "PldAccountant",
    "PrivacySpent",
    "RdpAccountant",
    "check_accountant",
    "check_adversary",
    "dp_epsilons",
    "epsilon_chosen_sample",
    "epsilon_for_method",
    "epsilon_group",
    "epsilon_group_pld",
    "epsilon_known_sample",
    "epsilon_known_sample_pld",
    "epsilon_known_sample_rdp",
    "epsilon_naive",
    "epsilon_of_participation",
    "epsilon_of_releases",
    "epsilon_server_view",
    "epsilon_uldp",
    "epsilon_uldp_pld",
    "gaussian_epsilon",
    "group_dp_epsilon",
    "group_epsilon_bounds",
    "group_privacy_table",
    "group_rdp_epsilon",
    "mixture_group_curve",
    "paper_group_dp_epsilon",
    "paper_group_rdp_epsilon",
    "power_of_two_bounds",
    "rdp_gaussian",
    "rdp_subsampled_gaussian",
    "rdp_to_dp",
    "sigma_for_budget",
    "sigma_for_epsilon",
]
