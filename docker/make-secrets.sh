#!/usr/bin/env bash
# docker/make-secrets.sh [DIR]: creates the Compose secrets docker-compose.yml
# mounts, each one a random value, in DIR (default docker/secrets), leaving
# any that exists alone. DIR is made 0700 (only its owner enters it) and each
# file 0644: a Compose secret from a file is a bind mount keeping the file's
# mode, and the containers read it as their own unprivileged user.
set -euo pipefail
dir=${1:-"$(dirname "$0")/secrets"}
mkdir -p "$dir"
chmod 700 "$dir"
random_hex() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
for name in store_edge_token store_operator_token receipt_key gh_signing_secret stripe_signing_secret; do
  file=$dir/$name
  [[ -s $file ]] && continue
  case $name in
    *_token | receipt_key) value=$(random_hex) ;;
    *) value=whsec_$(random_hex) ;;
  esac
  (umask 022 && printf '%s\n' "$value" >"$file")
  echo "[secrets] made $file"
done
chmod 644 "$dir"/store_edge_token "$dir"/store_operator_token "$dir"/receipt_key "$dir"/gh_signing_secret "$dir"/stripe_signing_secret
