"""wrk's report is parsed into the units the tables use, and a missing wrk is explained."""

from __future__ import annotations

import pytest

from lab.wrk import INSTALL_HINT, WrkError, find_wrk, parse_wrk_output, wrk_command

# Real wrk 4.1 reports (Debian bookworm), one healthy and one with errors.
HEALTHY = """\
Running 2s test @ http://127.0.0.1:18765/bench/small
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   415.97us  253.05us   5.08ms   94.84%
    Req/Sec    20.08k     2.55k   22.81k    70.00%
  Latency Distribution
     50%  342.00us
     75%  458.00us
     90%  611.00us
     99%    1.23ms
  39966 requests in 2.00s, 5.30MB read
Requests/sec:  19940.30
Transfer/sec:      2.64MB
"""

FAILING = """\
Running 1s test @ http://127.0.0.1:18765/
  1 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02s   227.32us   2.80s    90.30%
    Req/Sec     3.33k     0.00     3.33k   100.00%
  Latency Distribution
     50%    1.02s
     75%  383.00us
     90%  584.00us
     99%    2.80s
  330 requests in 1.00m, 44.79KB read
  Socket errors: connect 1, read 8, write 86, timeout 2
  Non-2xx or 3xx responses: 12
Requests/sec:    329.89
Transfer/sec:     44.78KB
"""


def test_parses_rate_latency_and_counts() -> None:
    """Requests/s, p50 and p99 in milliseconds, and the request count come from the report."""
    result = parse_wrk_output(HEALTHY)
    assert result.requests_per_s == pytest.approx(19940.30)
    assert result.p50_ms == pytest.approx(0.342)
    assert result.p99_ms == pytest.approx(1.23)
    assert result.requests == 39966
    assert result.duration_s == pytest.approx(2.0)
    assert result.errors == 0


def test_counts_socket_errors_and_error_statuses() -> None:
    """Errors are error statuses plus every kind of socket error; s and m units convert."""
    result = parse_wrk_output(FAILING)
    assert result.non_2xx == 12
    assert result.socket_errors == 1 + 8 + 86 + 2
    assert result.errors == 109
    assert result.p50_ms == pytest.approx(1020.0)
    assert result.p99_ms == pytest.approx(2800.0)
    assert result.duration_s == pytest.approx(60.0)


def test_report_without_latency_distribution_is_refused() -> None:
    """Output lacking the --latency percentiles is an error, not a zero latency."""
    without = "\n".join(line for line in HEALTHY.splitlines() if "%  " not in line)
    with pytest.raises(WrkError, match="--latency"):
        parse_wrk_output(without)


def test_connection_refused_output_is_refused() -> None:
    """wrk's one-line failure (nothing listening) raises instead of parsing as zero."""
    with pytest.raises(WrkError):
        parse_wrk_output("unable to connect to 127.0.0.1:1 Connection refused\n")


def test_command_keeps_connections_and_asks_for_percentiles() -> None:
    """The command fixes duration (whole seconds) and connections, and asks for percentiles."""
    command = wrk_command("/usr/bin/wrk", "http://x/", duration_s=2.4, connections=64)
    assert command[0] == "/usr/bin/wrk"
    assert "--latency" in command
    assert "--connections=64" in command
    assert "--duration=2s" in command
    assert command[-1] == "http://x/"


def test_missing_wrk_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without wrk on PATH the error tells which package to install."""
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(WrkError, match="apt-get install wrk") as raised:
        find_wrk()
    assert str(raised.value) == INSTALL_HINT
