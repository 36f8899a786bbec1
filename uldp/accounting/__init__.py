"""Privacy accounting: RDP of the (sub-sampled) Gaussian, conversions, group privacy, each method's guarantee.

Pure functions with keyword-only privacy arguments. Two accountants, registered by name (:data:`ACCOUNTANTS`, each an
:class:`Accountant`): ``"rdp"``, the paper's (opacus' analysis; dp-accounting cross-checks it in the tests), and
``"pld"``, the tighter privacy-loss distribution of dp-accounting, with ULDP-GROUP-k accounted as a mixture of
Gaussians. See :mod:`uldp.accounting.rdp`, :mod:`uldp.accounting.pld`, :mod:`uldp.accounting.group` and
:mod:`uldp.accounting.methods`.
"""

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
    "GroupPrivacySpent",
    "PldAccountant",
    "PrivacySpent",
    "RdpAccountant",
    "check_accountant",
    "dp_epsilons",
    "epsilon_for_method",
    "epsilon_group",
    "epsilon_group_pld",
    "epsilon_naive",
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
