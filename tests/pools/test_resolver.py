"""The loader's resolver answers common scalars without PyYAML's generic lookup; its tags must be
exactly the ones PyYAML's ``resolve`` gives with the same implicit resolvers, for every scalar."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.resolver import BaseResolver

from hcs_deviceplugin.pools.document import _StrictResolver

YAMLISH = st.sampled_from(list("yYnNtTfFoO~-+.0123456789<=xGp :_eE")) | st.characters()


@settings(max_examples=2000, deadline=None)
@given(
    st.text(YAMLISH, max_size=12),
    st.sampled_from([ScalarNode, SequenceNode, MappingNode]),
    st.tuples(st.booleans(), st.booleans()),
)
@example("", ScalarNode, (True, False))
@example("null", ScalarNode, (True, False))
@example("12", ScalarNode, (False, True))
@example("0x1F", ScalarNode, (True, False))
@example("1:30", ScalarNode, (True, False))
@example(".inf", ScalarNode, (True, False))
@example("<<", ScalarNode, (True, False))
@example("=", ScalarNode, (True, False))
@example("pool-0001", ScalarNode, (True, False))
def test_resolve_gives_pyyamls_tags(value: str, kind: type, implicit: tuple[bool, bool]) -> None:
    resolver = _StrictResolver()
    expected = BaseResolver.resolve(resolver, kind, value, implicit)  # type: ignore[no-untyped-call]
    assert resolver.resolve(kind, value, implicit) == expected
