"""Opens many wss:// connections with the reference's transport (the
`websockets` sync client, which starts its reader thread before it writes the
upgrade request) over TLS 1.3 and then TLS 1.2, each with a short open
timeout, and prints how many failed (then one line per failure). Every tenth
connection also says hello and discovers (the reference client).

  python wss_many.py WSS_URL CA_FILE N_TLS13 N_TLS12
"""
import ssl
import sys

from unienv_interface.remote import RemoteClient, WebSocketTransport

url, ca_file, n13, n12 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
failures = []
for version, count in ((ssl.TLSVersion.TLSv1_3, n13), (ssl.TLSVersion.TLSv1_2, n12)):
    context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = context.maximum_version = version
    for i in range(count):
        try:
            transport = WebSocketTransport.connect(url, ssl=context, open_timeout=5)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failures.append(f"{version.name} #{i}: {type(e).__name__}: {e}")
            continue
        if i % 10 == 0:
            RemoteClient(transport, timeout=5).close()
        else:
            transport.close()
print(len(failures))
for failure in failures:
    print(failure)
