"""SPEC §7 on Redis: due times come from the Redis server's clock
(``TIME`` inside each script), so an API node whose own clock runs ahead
cannot hand out a delayed message early."""

from tests.contract.helpers import (
    check_an_api_clock_ahead_hands_out_nothing_early)


def test_an_api_node_clock_an_hour_ahead_hands_out_nothing_early(
        driver, project, monkeypatch):
    check_an_api_clock_ahead_hands_out_nothing_early(driver, project,
                                                     monkeypatch)
