"""The ConsumerGroupDescribe decoder never fails with anything but its typed error (fuzzed)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_kip848 import FULL

from lagscope.collector.kip848 import ConsumerGroupDescribeDecodeError, ConsumerGroupDescription, decode_response


def _outcome(data: bytes) -> list[ConsumerGroupDescription] | ConsumerGroupDescribeDecodeError:
    try:
        return decode_response(data)
    except ConsumerGroupDescribeDecodeError as exc:  # any other exception fails the test
        return exc


def _assert_well_formed(outcome: list[ConsumerGroupDescription] | ConsumerGroupDescribeDecodeError) -> None:
    if isinstance(outcome, ConsumerGroupDescribeDecodeError):
        assert str(outcome).startswith("ConsumerGroupDescribe response:")
    else:
        for d in outcome:
            assert isinstance(d, ConsumerGroupDescription)
            # the schema's non-nullable strings are strings (a null there is a decode error)
            assert all(isinstance(v, str) for v in (d.group_id, d.state, d.assignor))
            assert all(isinstance(m.member_id, str) and isinstance(m.client_id, str) for m in d.members)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    _assert_well_formed(_outcome(data))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=len(FULL) - 1), st.integers(min_value=0, max_value=255))
def test_one_corrupted_byte(position: int, value: int) -> None:
    # a valid response with one byte changed either still decodes or raises the typed error
    data = bytearray(FULL)
    data[position] = value
    _assert_well_formed(_outcome(bytes(data)))
