"""im2col convolutions (:mod:`uldp.training.unfold`): the same outputs and input gradients as ``nn.Conv2d``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from uldp.training.unfold import UnfoldConv2d


@pytest.mark.parametrize("padding, stride", [(0, 1), (2, 1), (1, 2)])
def test_unfold_conv_equals_conv2d(padding, stride):
    conv = nn.Conv2d(3, 4, (5, 3), stride=stride, padding=padding)
    x = torch.randn(2, 3, 11, 9, requires_grad=True)
    unfolded = UnfoldConv2d(conv)
    torch.testing.assert_close(unfolded(x), conv(x), atol=1e-5, rtol=1e-5)
    (expected,) = torch.autograd.grad(conv(x).sin().sum(), x)
    (actual,) = torch.autograd.grad(unfolded(x).sin().sum(), x)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def test_grouped_or_dilated_convolutions_are_refused_by_name():
    with pytest.raises(ValueError, match="groups=1, dilation=1"):
        UnfoldConv2d(nn.Conv2d(4, 4, 3, groups=2))
