"""`--delivery-timeout-ms`: 0 (records never expire) is librdkafka's alone, and a bad value
is refused by name before any cluster starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from seglog.chaos.__main__ import delivery_timeout_error, main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--delivery-timeout-ms", "0"], "seglog's Producer needs a bound"),
        (["--delivery-timeout-ms", "-5", "--client", "librdkafka"], "must be 0 or more, not -5"),
    ],
)
def test_a_delivery_timeout_the_client_cannot_take_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    base = ["soak", "--target", "local", "--duration", "12", "--out", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as e:
        main([*base, *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before the run began


def test_librdkafka_may_let_records_never_expire() -> None:
    assert delivery_timeout_error("librdkafka", 0) is None
    assert delivery_timeout_error("seglog", 45_000) is None
    assert delivery_timeout_error("seglog", 0) is not None
