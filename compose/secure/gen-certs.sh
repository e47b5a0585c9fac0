#!/usr/bin/env bash
# Make what the secure compose profile mounts (compose/secure/generated/):
#   ca.pem                   the test CA every listener trusts
#   node1.pem .. node3.pem   the nodes' keystores (key + certificate; SANs: nodeN,
#                            127.0.0.1, localhost), also their client certificates
#                            between nodes (super users: User:CN=nodeN)
#   admin.pem                an operator's certificate (super user User:CN=admin)
#   alice.pem                a client's certificate
#   server.properties        secure.properties.in with a fresh admin password
#   admin.properties         --command-config for seglog's tools (mTLS as admin)
#   admin.password           the PLAIN password of User:admin on the SASL_SSL listener
#
#   compose/secure/gen-certs.sh            # needs seglog installed (pip install -e .)
#
# Test material only: the keys are not encrypted and are world-readable so that the
# containers' seglog user reads them from the bind mount.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT="$HERE/generated"
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
"$PYTHON" -m seglog.node.security.certificates --out "$OUT" \
    --node node1 --node node2 --node node3 --host 127.0.0.1 --host localhost \
    --client admin --client alice
PASSWORD=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(18))')
printf '%s\n' "$PASSWORD" > "$OUT/admin.password"
sed "s|@ADMIN_PASSWORD@|$PASSWORD|" "$HERE/secure.properties.in" > "$OUT/server.properties"
cat > "$OUT/admin.properties" <<PROPS
security.protocol=SSL
ssl.truststore.location=$OUT/ca.pem
ssl.keystore.location=$OUT/admin.pem
PROPS
chmod 0644 "$OUT"/*
echo "wrote the secure profile's certificates and settings to $OUT"
