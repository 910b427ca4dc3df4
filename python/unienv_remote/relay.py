"""Hosts that dial out, and the relay they dial, in the learner's process
(SPEC.md, "Relay and dial-out hosts"; docs/network.md).

A simulator that can only make outbound connections (an engine in an
editor, a render node behind NAT) dials a relay and registers under a name
(``RemoteServer.dial``, ``unienv-remote serve --dial URL --name NAME``, the C
ABI's ``unienv_server_dial``); clients reach it at ``ws://RELAY/hosts/NAME``
as if it listened. :class:`Relay` runs the relay inside a learner, in
Unity ML-Agents' shape: start engine processes that dial ``relay.url``,
``relay.wait_for(n)``, then ``RemoteVectorEnv(relay.addresses())``.
"""

from ._native import DialHandle, DialStatus, Relay, RelayHost

__all__ = ["Relay", "RelayHost", "DialHandle", "DialStatus"]
