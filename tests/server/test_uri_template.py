"""UriTemplate: parsing, matching and expansion."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.server._uri_template import UriTemplate


def test_variables_in_order_of_first_appearance() -> None:
    t = UriTemplate("db://{schema}/{table}/{+rest}{?limit,offset}{#frag}")
    assert t.variables == ("schema", "table", "rest", "limit", "offset", "frag")
    assert UriTemplate("static://x").variables == ()
    assert UriTemplate("x://{a}/{a}").variables == ("a",)


def test_str_repr_eq_hash() -> None:
    t = UriTemplate("x://{a}")
    assert str(t) == "x://{a}" == t.template
    assert repr(t) == "UriTemplate('x://{a}')"
    assert t == UriTemplate("x://{a}") and t != UriTemplate("x://{b}") and t != "x://{a}"
    assert len({t, UriTemplate("x://{a}")}) == 1


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        # level 1
        ("weather://{city}/current", "weather://paris/current", {"city": "paris"}),
        ("users://{id}", "users://42", {"id": "42"}),
        ("users://{id}", "users://a,b", {"id": "a,b"}),
        ("users://{id}/posts/{post}", "users://7/posts/99", {"id": "7", "post": "99"}),
        ("users://{id}/posts/{post}", "users://7/posts/", None),
        ("users://{id}", "users://", None),
        ("users://{id}", "users://a/b", None),  # {var} never spans '/'
        ("users://{id}", "users://a?b=1", None),  # nor a query
        ("users://{id}", "userz://a", None),
        ("users://{id}", "users://abc/", None),
        ("users://{id}.json", "users://doc.v2.json", {"id": "doc.v2"}),
        ("{scheme}://{host}", "http://h", {"scheme": "http", "host": "h"}),
        # percent-decoding
        ("users://{name}", "users://J%C3%BCrgen%20M", {"name": "Jürgen M"}),
        ("users://{name}", "users://a%2Fb", {"name": "a/b"}),
        ("users://{name}", "users://100%", {"name": "100%"}),
        # literals are literal (regex metacharacters escaped)
        ("a+b://{x}.(y)", "a+b://1.(y)", {"x": "1"}),
        ("a+b://{x}.(y)", "aab://1.(y)", None),
        # several variables in one expression
        ("map://{lat,lon}", "map://48.8,2.3", {"lat": "48.8", "lon": "2.3"}),
        ("map://{lat,lon}", "map://48.8", None),
        # repeated variable must agree
        ("x://{a}/{a}", "x://1/1", {"a": "1"}),
        ("x://{a}/{a}", "x://1/2", None),
        # reserved expansion spans '/'
        ("file:///{+path}", "file:///etc/hosts", {"path": "etc/hosts"}),
        ("file:///{+path}", "file:///", None),
        ("file:///{+path}/meta", "file:///a/b/meta", {"path": "a/b"}),
        ("repo://{owner}/{+path}", "repo://me/src/a%20b.py", {"owner": "me", "path": "src/a b.py"}),
        # query expansion: optional, any order, extras ignored
        ("search://{index}{?q,limit}", "search://docs", {"index": "docs"}),
        ("search://{index}{?q,limit}", "search://docs?q=a%20b", {"index": "docs", "q": "a b"}),
        ("search://{index}{?q,limit}", "search://d?limit=5&q=x", {"index": "d", "q": "x", "limit": "5"}),
        ("search://{index}{?q,limit}", "search://docs?other=1&q=", {"index": "docs", "q": ""}),
        ("search://{index}{?q,limit}", "search://docs?", {"index": "docs"}),
        ("file:///{+path}{?rev}", "file:///a/b?rev=3", {"path": "a/b", "rev": "3"}),
        ("search://all?fixed=1{&q}", "search://all?fixed=1&q=z", {"q": "z"}),
        ("search://all?fixed=1{&q}", "search://all?fixed=1", {}),
        ("search://all?fixed=1{&q}", "search://all?fixed=2", None),
        # fragments
        ("doc://{id}{#section}", "doc://7#intro/part", {"id": "7", "section": "intro/part"}),
        ("doc://{id}{#section}", "doc://7", {"id": "7"}),
    ],
)
def test_match(template: str, uri: str, expected: dict[str, str] | None) -> None:
    assert UriTemplate(template).match(uri) == expected


def test_match_without_variables() -> None:
    t = UriTemplate("config://app")
    assert t.match("config://app") == {}
    assert t.match("config://app2") is None


@pytest.mark.parametrize(
    ("template", "values", "expected"),
    [
        ("users://{id}", {"id": 42}, "users://42"),
        ("users://{name}", {"name": "Jürgen M/x"}, "users://J%C3%BCrgen%20M%2Fx"),
        ("users://{name}", {"name": "a-b_c.d~e"}, "users://a-b_c.d~e"),
        ("users://{name}", {}, "users://"),
        ("users://{name}", {"name": None}, "users://"),
        ("file:///{+path}", {"path": "etc/a b/c?d#e"}, "file:///etc/a%20b/c?d#e"),
        ("file:///{+path}", {"path": "100%25 and 100%"}, "file:///100%25%20and%20100%25"),
        ("map://{lat,lon}", {"lat": 1.5, "lon": -2}, "map://1.5,-2"),
        ("map://{lat,lon}", {"lon": 3}, "map://3"),
        ("list://{items}", {"items": ["a b", "c"]}, "list://a%20b,c"),
        ("list://{items}", {"items": []}, "list://"),
        ("kv://{m}", {"m": {"k": "v", "x": 1}}, "kv://k,v,x,1"),
        ("flag://{on}", {"on": True}, "flag://true"),
        ("search://{i}{?q,limit}", {"i": "d", "q": "a&b=c", "limit": 5}, "search://d?q=a%26b%3Dc&limit=5"),
        ("search://{index}{?q,limit}", {"index": "d", "limit": 5}, "search://d?limit=5"),
        ("search://{index}{?q,limit}", {"index": "d"}, "search://d"),
        ("search://{index}{?q}", {"index": "d", "q": ""}, "search://d?q="),
        ("search://all?fixed=1{&q}", {"q": "z"}, "search://all?fixed=1&q=z"),
        ("doc://{id}{#section}", {"id": 1, "section": "a/b c"}, "doc://1#a/b%20c"),
        ("doc://{id}{#section}", {"id": 1}, "doc://1"),
    ],
)
def test_expand(template: str, values: dict[str, Any], expected: str) -> None:
    assert UriTemplate(template).expand(**values) == expected


def test_expand_accepts_a_mapping_for_dotted_names() -> None:
    t = UriTemplate("x://{a.b}/{c}")
    assert t.expand({"a.b": "1"}, c=2) == "x://1/2"
    assert t.match("x://1/2") == {"a.b": "1", "c": "2"}


@pytest.mark.parametrize(
    ("template", "values"),
    [
        ("users://{name}", {"name": "Jürgen M/x?&#"}),
        ("file:///{+path}", {"path": "etc/a b/hosts"}),
        ("search://{index}{?q,limit}", {"index": "a b", "q": "x&y=z", "limit": "10"}),
        ("map://{lat,lon}/{+rest}{#f}", {"lat": "1", "lon": "2", "rest": "r/s", "f": "top"}),
    ],
)
def test_expand_then_match_round_trips(template: str, values: dict[str, str]) -> None:
    t = UriTemplate(template)
    assert t.match(t.expand(**values)) == values


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ("users://{id", "unclosed"),
        ("users://id}", "unbalanced"),
        ("users://{a{b}}", "nested"),
        ("users://}{a}", "unbalanced"),
        ("users://{}", "invalid variable name"),
        ("users://{a b}", "invalid variable name"),
        ("users://{a,}", "invalid variable name"),
        ("users://{/path}", "unsupported operator"),
        ("users://{.ext}", "unsupported operator"),
        ("users://{;p}", "unsupported operator"),
        ("users://{=x}", "unsupported operator"),
        ("users://{path*}", "modifiers"),
        ("users://{name:3}", "modifiers"),
    ],
)
def test_invalid_templates(template: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        UriTemplate(template)
