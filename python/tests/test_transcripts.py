"""The same transcript through the reference client and through ours, against
our server and the reference server: every result must be identical."""

import pytest
import unienv_interface.remote as reference

import unienv_remote as ours
from compare import assert_same_transcripts
from transcript import scenario


@pytest.mark.parametrize("server_kind", ["ours", "reference"])
def test_our_client_gives_the_reference_clients_results(servers, server_kind):
    want = scenario(reference, servers(server_kind).url)
    got = scenario(ours, servers(server_kind).url)
    assert_same_transcripts(got, want, f"our client vs the reference client, against the {server_kind} server")
    # The scenario exercised every kind of outcome.
    assert {"ok", "error", "uncertain_outcome", "exception"} <= {r[1] for r in got}
