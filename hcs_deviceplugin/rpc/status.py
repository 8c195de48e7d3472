"""gRPC status codes and the error that carries one, on either side of a call."""

from __future__ import annotations

import enum


class Code(enum.IntEnum):
    """The gRPC status codes (their numbers are the wire values of ``grpc-status``)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    @classmethod
    def of(cls, value: int) -> Code:
        """The code for a wire value; an unknown number is UNKNOWN, as the gRPC spec says."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class RpcError(Exception):
    """A call that ended with a status other than OK.

    A handler raises it (through ``CallContext.abort``) to answer with that status; a client call
    raises it with the status the peer sent, or with the local reason (UNAVAILABLE when nothing
    answers, DEADLINE_EXCEEDED, CANCELLED).
    """

    def __init__(self, code: Code, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
