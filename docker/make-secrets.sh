#!/usr/bin/env bash
# docker/make-secrets.sh [DIR]: creates the Compose secrets docker-compose.yml
# mounts, each one a random value, in DIR (default docker/secrets), leaving
# any that exists alone. DIR is made 0700 (only its owner enters it) and each
# file 0644: a Compose secret from a file is a bind mount keeping the file's
# mode, and the containers read it as their own unprivileged user.
#
# Each edge gets a token of its own (edge_1_token, edge_2_token), and the
# store's list of edge tokens (store_edge_token) names each with the one node
# it speaks for (`<token> nodes=edge-1`): a line is added for an edge token
# the list lacks, so a list made by an earlier version (one bare token every
# edge sent) gains the scoped lines; remove its bare line once the edges run
# with their own tokens (docs/tokens.md, "Node names").
set -euo pipefail
dir=${1:-"$(dirname "$0")/secrets"}
edges=(edge-1 edge-2)
mkdir -p "$dir"
chmod 700 "$dir"
random_hex() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
made() { echo "[secrets] made $1"; }
files=(store_operator_token receipt_key gh_signing_secret stripe_signing_secret)
for node in "${edges[@]}"; do files+=("${node//-/_}_token"); done
for name in "${files[@]}"; do
  file=$dir/$name
  [[ -s $file ]] && continue
  case $name in
    *_token | receipt_key) value=$(random_hex) ;;
    *) value=whsec_$(random_hex) ;;
  esac
  (umask 022 && printf '%s\n' "$value" >"$file")
  made "$file"
done
list=$dir/store_edge_token
[[ -e $list ]] || { (umask 022 && : >"$list"); made "$list"; }
for node in "${edges[@]}"; do
  token=$(grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$dir/${node//-/_}_token" | head -n 1 | tr -d '[:space:]')
  if ! grep -q -e "^[[:space:]]*$token\([[:space:]]\|\$\)" "$list"; then
    printf '%s nodes=%s\n' "$token" "$node" >>"$list"
    echo "[secrets] $list: added the token of $node (nodes=$node)"
  fi
done
chmod 644 "$list" "${files[@]/#/$dir/}"
