"""The models, losses and metrics of the paper's experiments (Section 5.1), one per dataset, registered by name.

- creditcard: the authors' ``PrivateFraudNet(30, 30, 4)`` (MLP, GroupNorm, dropout 0.5), 5012 parameters,
  cross-entropy; accuracy and balanced accuracy.
- mnist: the authors' ``CNNMnist``, 21840 parameters, cross-entropy; accuracy and balanced accuracy.
- heart_disease: FLamby's logistic regression on 13 features, 14 parameters, BCE; accuracy and balanced accuracy.
- tcga_brca: FLamby's linear Cox model on 39 features, 40 parameters, Cox partial likelihood; C-index.
- synthetic: logistic regression on 15 features, 16 parameters, BCE; accuracy and balanced accuracy.

Models return raw scores: logits for classification (the losses apply ``log_softmax`` / the logistic link
themselves, which is numerically safer than the authors' ``log_softmax`` / ``sigmoid`` outputs and gives the same
loss), the log-risk ``x @ beta`` for the Cox model.

Every loss ``loss(outputs, targets, weight)`` returns the *weighted mean* ``sum_i w_i l_i / max(sum_i w_i, 1)`` with
a 0/1 float ``weight`` marking real records (padding has weight 0; ``None`` means all ones). The losses use only
pure tensor operations, so they run under ``torch.func.vmap`` and ``torch.func.grad``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from uldp.data.registry import RegistryView

LossFunction = Callable[[Tensor, Tensor, "Tensor | None"], Tensor]


class CreditcardMLP(nn.Module):
    """The authors' ``PrivateFraudNet(30, 30, 4)``: 5012 parameters.

    ``Linear(30, 30) -> ReLU -> GroupNorm(1, 30)``, then 4 blocks ``Linear(30, 30) -> ReLU -> GroupNorm(1, 30) ->
    Dropout(0.5)``, then ``Linear(30, 2)``: 990 + 4 * 990 + 62 = 5012.
    """

    def __init__(
        self, input_dim: int = 30, hidden_dim: int = 30, num_blocks: int = 4, num_classes: int = 2
    ):
        super().__init__()
        self.input = nn.Sequential(
            nn.Linear(input_dim, hidden_dim), nn.ReLU(), nn.GroupNorm(1, hidden_dim)
        )
        self.blocks = nn.Sequential(
            *(
                nn.Sequential(
                    nn.Linear(hidden_dim, hidden_dim),
                    nn.ReLU(),
                    nn.GroupNorm(1, hidden_dim),
                    nn.Dropout(0.5),
                )
                for _ in range(num_blocks)
            )
        )
        self.output = nn.Linear(hidden_dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """Logits ``[n, 2]`` of records ``x`` ``[n, 30]``."""
        return self.output(self.blocks(self.input(x)))


class MnistCNN(nn.Module):
    """The authors' ``CNNMnist``: 21840 parameters.

    ``conv(1->10, k5) -> maxpool 2 -> ReLU -> conv(10->20, k5) -> Dropout2d -> maxpool 2 -> ReLU -> FC(320, 50) ->
    ReLU -> dropout -> FC(50, 10)``: 260 + 5020 + 16050 + 510 = 21840.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc_drop = nn.Dropout()
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x: Tensor) -> Tensor:
        """Logits ``[n, 10]`` of images ``x`` ``[n, 1, 28, 28]``."""
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = F.relu(self.fc1(x.flatten(start_dim=1)))
        return self.fc2(self.fc_drop(x))


class LinearScore(nn.Module):
    """One linear score ``x @ w + b`` (``[n, 1]``): a logistic regression's logit or a linear Cox model's log-risk.

    FLamby's Heart Disease and TCGA-BRCA ``Baseline`` models (``input_dim + 1`` parameters).
    """

    def __init__(self, input_dim: int):
        super().__init__()
        self.linear = nn.Linear(input_dim, 1)

    def forward(self, x: Tensor) -> Tensor:
        """Scores ``[n, 1]``."""
        return self.linear(x)


def _weighted_mean(per_record: Tensor, weight: Tensor | None) -> Tensor:
    """``sum_i w_i l_i / max(sum_i w_i, 1)`` (0 when every weight is 0)."""
    if weight is None:
        weight = torch.ones_like(per_record)
    return (per_record * weight).sum() / weight.sum().clamp_min(1.0)


def cross_entropy_loss(outputs: Tensor, targets: Tensor, weight: Tensor | None = None) -> Tensor:
    """Weighted mean cross-entropy of logits ``outputs`` ``[n, C]`` and integer ``targets`` ``[n]``.

    Example:
        >>> round(float(cross_entropy_loss(torch.zeros(3, 2), torch.tensor([0, 1, 1]))), 4)  # log 2
        0.6931
    """
    per_record = (
        -torch.log_softmax(outputs, dim=-1).gather(-1, targets.long().unsqueeze(-1)).squeeze(-1)
    )
    return _weighted_mean(per_record, weight)


def bce_loss(outputs: Tensor, targets: Tensor, weight: Tensor | None = None) -> Tensor:
    """Weighted mean binary cross-entropy of logits ``outputs`` (``[n, 1]`` or ``[n]``) and 0/1 ``targets`` ``[n]``.

    Uses the stable form ``softplus(z) - y z`` of ``-y log sigmoid(z) - (1 - y) log(1 - sigmoid(z))``.
    """
    logits = outputs.reshape(targets.shape)
    per_record = F.softplus(logits) - targets * logits
    return _weighted_mean(per_record, weight)


def cox_loss(outputs: Tensor, targets: Tensor, weight: Tensor | None = None) -> Tensor:
    """Weighted mean negative Cox partial log-likelihood (FLamby's ``BaselineLoss``, with Breslow ties).

    For records with log-risk ``s_i = outputs[i]``, event ``E_i = targets[i, 0]`` and time ``T_i = targets[i, 1]``,
    the loss is ``sum_i w_i E_i (log sum_{j: T_j >= T_i, w_j = 1} exp(s_j) - s_i) / max(sum_i w_i, 1)``: risk sets
    contain only weight-1 records and, for tied times, every record tied with ``T_i`` (Breslow's handling of ties).
    Like FLamby, the sum over events is divided by the number of records, not of events. FLamby's sort-based
    version resolves ties by sort order instead; without tied times the two agree.

    The risk set is an ``[n, n]`` mask, so no sort or data-dependent control flow is needed (``vmap``-safe);
    masked entries get a large negative finite log-risk rather than ``-inf`` so that gradients stay finite.
    """
    scores = outputs.reshape(targets.shape[:-1])
    events, times = targets[..., 0], targets[..., 1]
    member = weight if weight is not None else torch.ones_like(scores)
    at_risk = (times.unsqueeze(-2) >= times.unsqueeze(-1)) & (
        member.unsqueeze(-2) > 0
    )  # [i, j]: T_j >= T_i
    outside = (
        torch.finfo(scores.dtype).min / 4
    )  # exp() of it is 0, yet it keeps logsumexp and gradients finite
    masked = torch.where(at_risk, scores.unsqueeze(-2), outside)
    per_record = events * (torch.logsumexp(masked, dim=-1) - scores)
    return _weighted_mean(per_record, weight)


def accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Fraction of predictions equal to the labels (scikit-learn's ``accuracy_score``)."""
    from sklearn.metrics import (
        accuracy_score,
    )  # scikit-learn costs about a second: imported on first use

    return float(accuracy_score(np.asarray(y_true), np.asarray(y_pred)))


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean over the classes present in ``y_true`` of the recall (scikit-learn's ``balanced_accuracy_score``).

    A predicted class that no label has (a model predicting a class absent from a small test set) has no recall
    and is left out, as scikit-learn does; its warnings about that, and about a single class, are not repeated at
    every evaluation.

    Example:
        >>> round(balanced_accuracy(np.array([0, 0, 0, 1]), np.array([0, 0, 1, 1])), 4)  # (2/3 + 1) / 2
        0.8333
    """
    from sklearn.metrics import balanced_accuracy_score  # imported on first use, as above

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
        warnings.filterwarnings("ignore", message="A single label was found")
        return float(balanced_accuracy_score(np.asarray(y_true), np.asarray(y_pred)))


def concordance_index(times: np.ndarray, risk: np.ndarray, events: np.ndarray) -> float:
    """Harrell's C-index of risk scores (higher risk = earlier event): FLamby's metric for Fed-TCGA-BRCA.

    A pair ``(i, j)`` is comparable when ``i`` had an event and ``T_i < T_j``, or ``T_i = T_j`` and ``j`` is
    censored; it is concordant when ``risk_i > risk_j`` and counts 1/2 when the risks tie. Computed by
    ``lifelines.utils.concordance_index(T, -risk, E)`` as FLamby does (lifelines takes predicted *times*, so the
    risk is negated), in O(n log n).

    Args:
        times: Event or censoring times ``[n]``.
        risk: Predicted risk scores ``[n]`` (the Cox model's log-risk).
        events: Event indicators ``[n]`` (1 = event observed).

    Returns:
        The fraction of concordant comparable pairs; NaN when a risk is not finite (a diverged model ranks
        nothing).

    Raises:
        ValueError: No comparable pair.

    Example:
        >>> concordance_index(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0]), np.array([1, 1, 0]))
        1.0
    """
    from lifelines.utils import (
        concordance_index as lifelines_concordance_index,
    )  # survival only: on first use

    times, risk = np.asarray(times, dtype=np.float64), np.asarray(risk, dtype=np.float64)
    if not np.isfinite(risk).all():
        return float("nan")
    try:
        return float(lifelines_concordance_index(times, -risk, np.asarray(events).astype(bool)))
    except ZeroDivisionError as error:  # lifelines: "No admissable pairs in the dataset."
        raise ValueError(
            "no comparable pair: the C-index needs an event before another record's time"
        ) from error


@dataclass(frozen=True)
class ModelSpec:
    """A dataset's model and loss.

    Attributes:
        build: Constructor of the model.
        loss: The weighted mean loss.
        task: ``"multiclass"``, ``"binary"`` or ``"survival"`` (matches the dataset's task).
    """

    build: Callable[[], nn.Module]
    loss: LossFunction
    task: str


#: Every registered dataset's model, loss and task by dataset name: a live view of the registry
#: (:attr:`uldp.data.registry.DatasetSpec.model`; each built-in dataset's module says which of the above it uses).
MODELS: RegistryView[ModelSpec] = RegistryView(lambda spec: spec.model())


def _spec(dataset_name: str) -> ModelSpec:
    if dataset_name not in MODELS:
        raise ValueError(
            f"no model for dataset {dataset_name!r}; choose one of {', '.join(MODELS)}"
        )
    return MODELS[dataset_name]


def build_model(dataset_name: str, *, seed: int | None = None) -> nn.Module:
    """Return a freshly initialised model for a dataset (PyTorch's default initialisation).

    Args:
        dataset_name: A key of :data:`MODELS`.
        seed: If given, the initialisation is drawn from ``torch.manual_seed(seed)`` without touching the global
            random state; otherwise from the global torch generator.

    Returns:
        The model (in training mode).

    Raises:
        ValueError: Unknown dataset.

    Example:
        >>> sum(p.numel() for p in build_model("tcga_brca").parameters())
        40
    """
    spec = _spec(dataset_name)
    if seed is None:
        return spec.build()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build()


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (the dimension ``d`` of the model update)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def loss_function(dataset_name: str) -> LossFunction:
    """Return the weighted mean loss ``(outputs, targets, weight) -> Tensor`` of a dataset's model.

    Raises:
        ValueError: Unknown dataset.
    """
    return _spec(dataset_name).loss


@torch.no_grad()
def evaluate(
    model: nn.Module, x: Tensor, y: Tensor, dataset_name: str, *, batch_size: int = 2048
) -> dict:
    """Evaluate a model on records ``(x, y)`` in evaluation mode (dropout off); the model's mode is restored.

    Args:
        model: A model from :func:`build_model`.
        x: Features.
        y: Targets (labels, or ``[n, 2]`` (event, time)).
        dataset_name: Selects the loss and metrics.
        batch_size: Records per forward pass (bounds memory).

    Returns:
        ``{"loss", "accuracy", "balanced_accuracy"}`` for classification, ``{"loss", "c_index"}`` for survival
        (the Cox loss over the whole set, the risk sets spanning all records). The forward passes run on the
        model's device, the loss and metrics on the CPU.

    Raises:
        ValueError: Unknown dataset.
    """
    spec = _spec(dataset_name)
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    try:
        outputs = torch.cat([model(chunk.to(device)).cpu() for chunk in torch.split(x, batch_size)])
    finally:
        model.train(was_training)
    metrics = {"loss": float(spec.loss(outputs, y, None))}
    if spec.task == "survival":
        targets = y.numpy()
        metrics["c_index"] = concordance_index(
            targets[:, 1], outputs.reshape(-1).numpy(), targets[:, 0]
        )
        return metrics
    predicted = (
        (outputs.reshape(-1) > 0).long().numpy()
        if spec.task == "binary"
        else outputs.argmax(dim=-1).numpy()
    )
    labels = y.long().numpy()
    metrics["accuracy"] = accuracy(labels, predicted)
    metrics["balanced_accuracy"] = balanced_accuracy(labels, predicted)
    return metrics
