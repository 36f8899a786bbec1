"""uldp.common.threads: the number of torch threads a run trains with, and its restoration."""

import pytest
import torch

from uldp.common.threads import DEFAULT_THREADS, thread_count, torch_threads


def test_argument_then_environment_then_default(monkeypatch):
    monkeypatch.delenv("ULDP_THREADS", raising=False)
    assert thread_count() == DEFAULT_THREADS == 1
    monkeypatch.setenv("ULDP_THREADS", " 3 ")
    assert thread_count() == 3 and thread_count(2) == 2


@pytest.mark.parametrize("text", ["0", "two", "1.5", "-1"])
def test_bad_environment_value_names_it(monkeypatch, text):
    monkeypatch.setenv("ULDP_THREADS", text)
    with pytest.raises(ValueError, match="ULDP_THREADS must be an integer >= 1"):
        thread_count()


def test_bad_argument_names_it():
    with pytest.raises(ValueError, match="threads must be an integer >= 1, got 0"):
        thread_count(0)


def test_the_previous_setting_comes_back_even_after_an_error(monkeypatch):
    monkeypatch.delenv("ULDP_THREADS", raising=False)
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), torch_threads(2) as used:
        assert used == 2 == torch.get_num_threads()
        raise RuntimeError
    assert torch.get_num_threads() == before
    with torch_threads() as used:
        assert used == torch.get_num_threads() == 1


def test_a_run_does_not_depend_on_its_threads():
    from uldp.simulation import RunConfig, run

    config = RunConfig(
        dataset="synthetic", method="ULDP-AVG-w", n_users=6, rounds=2, local_epochs=1, seed=0
    )
    one, two = run(config, threads=1), run(config, threads=2)
    assert one.test_loss == two.test_loss and one.accuracy == two.accuracy
