import pytest

from roll.configs.device_mapping import parse_device_mapping


@pytest.mark.parametrize(
    "text, expected",
    [
        ("list(range(0,8))", list(range(8))),
        ("list(range(4))", [0, 1, 2, 3]),
        ("list(range(0, 8, 2))", [0, 2, 4, 6]),
        ("[0,1]", [0, 1]),
        ("[3]", [3]),
        ("list(range(0,2)) + [5, 6]", [0, 1, 5, 6]),
    ],
)
def test_strings_parse_like_python(text, expected):
    assert parse_device_mapping(text) == expected
    assert parse_device_mapping(text) == list(eval(text))  # the reference meaning, evaluated here only


def test_lists_and_null_pass_through():
    assert parse_device_mapping([2, 3]) == [2, 3]
    assert parse_device_mapping(None) is None


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("list(range(0,8)", "cannot parse"),
        ("__import__('os').system('true')", "cannot parse"),
        ("list(range(3,3))", "empty range"),
        ("[0, 0]", "repeat"),
        ([0, "a"], "integer"),
        (True, "list"),
    ],
)
def test_bad_strings_name_the_problem(bad, fragment):
    with pytest.raises(ValueError, match="device_mapping") as info:
        parse_device_mapping(bad)
    assert fragment in str(info.value)
