"""A call held back by the connection's unsent budget goes on once the socket has taken those bytes,
even when the socket takes them all at once and the client, whose window is still open, has nothing
to send that would wake the connection (our own client acknowledges DATA only every half window)."""

from __future__ import annotations

import pytest

from hcs_deviceplugin.rpc import server as rpc_server
from hcs_deviceplugin.rpc.client import unary_call
from hcs_deviceplugin.rpc.server import RpcServer
from tests.rpc.conftest import WAIT


@pytest.mark.parametrize("limit", [4 * 1024, 16 * 1024])
def test_a_budget_smaller_than_the_socket_buffer_never_stalls_an_answer(
    server: RpcServer, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    # A budget the socket's buffer always swallows whole: a pump stops on the budget, with the
    # window still open and nothing left unsent for the socket to report room for.
    monkeypatch.setattr(rpc_server, "UNSENT_LIMIT_BYTES", limit)
    request = bytes(range(256)) * 200  # 50 KiB: several budgets' worth, within the first window
    assert unary_call(server.path, "/t.T/Echo", request, timeout=WAIT) == request
