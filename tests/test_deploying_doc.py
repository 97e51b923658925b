"""docs/deploying.md's figures are the project's own: the Pulumi CLI it tells a user to install is the release of the
SDK requirements.txt pins, and the price it gives a leftover home volume is the price book's."""

import re

from domain.cost.prices import GP3_USD_PER_GB_MONTH
from tests.conftest import ROOT

DOC = (ROOT / "docs" / "deploying.md").read_text()


def test_the_cli_to_install_is_the_release_of_the_pinned_sdk():
    (pin,) = re.findall(r"^pulumi==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert f"Install Pulumi CLI **{pin}**" in DOC
    assert set(re.findall(r"--version (\S+)`", DOC)) == {pin}


def test_a_leftover_home_volume_is_priced_as_the_price_book_prices_gp3():
    assert set(re.findall(r"\$([0-9.]+) per GB-month", DOC)) == {GP3_USD_PER_GB_MONTH}
