"""The installed versions against the stack's ranges: what breaks them, named in one line."""

import pytest

from serving_stack import environment

REQUIREMENTS = ["gunicorn<28,>=25.1", "uvicorn[standard]<1,>=0.34", "pydantic>=2.11,<3"]


@pytest.mark.parametrize(
    ("installed", "broken"),
    [
        ({"gunicorn": "27.0.1", "uvicorn": "0.54.0", "pydantic": "2.11"}, []),
        ({"gunicorn": "25.1", "uvicorn": "0.34.0", "pydantic": "2.99.9"}, []),
        ({"gunicorn": "28.0", "uvicorn": "0.54.0", "pydantic": "2.12.1"}, ["gunicorn 28.0"]),
        ({"gunicorn": "27.0", "uvicorn": "0.54.0", "pydantic": "1.10.22"}, ["pydantic 1.10.22"]),
        ({"gunicorn": "27.0", "pydantic": "2.12.0"}, ["uvicorn missing"]),
    ],
    ids=["fits", "boundaries", "too new", "pydantic 1", "missing"],
)
def test_what_breaks_the_ranges_is_named(installed: dict[str, str], broken: list[str]) -> None:
    found = environment.problems(REQUIREMENTS, installed.get)

    assert [problem.partition(" (")[0] for problem in found] == broken
