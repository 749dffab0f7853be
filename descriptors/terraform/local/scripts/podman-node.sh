#!/bin/sh
# Create and destroy the local cloud's resources with podman.  Called by the
# local-exec provisioners of main.tf with its inputs in the environment.
#   network-create  NETWORK SUBNET RUN_ID [LABELS]
#   network-destroy NETWORK [RUN_ID]
#   node-create     NAME HOSTNAME_ ADDRESS NETWORK IMAGE MEMORY_MB RUN_ID PUBKEY_FILE KNOWN_HOSTS [LABELS]
#   node-destroy    NAME
#   policy-create   TABLE SUBNET MEMBERS [ADMIN]   (comma-separated lists)
#   policy-destroy  TABLE
# LABELS: extra podman labels, one key=value per line (the run's owner).
set -eu

# podman's default runtime (crun) and ulimits fail on hosts with hybrid
# cgroups and without CAP_SYS_RESOURCE; runc and explicit limits work.
RUNTIME="${REFARCH_PODMAN_RUNTIME:-runc}"
BOOT_TIMEOUT="${REFARCH_BOOT_TIMEOUT:-90}"

# `eval "$LABEL_ARGS"` sets the positional parameters to "--label key=value"
# for each line of LABELS (eval, not a function: a function cannot set its
# caller's positional parameters).
LABEL_ARGS='set --
while IFS= read -r line; do
    if [ -n "$line" ]; then set -- "$@" --label "$line"; fi
done <<EOF_LABELS
${LABELS:-}
EOF_LABELS'

case "$1" in
network-create)
    eval "$LABEL_ARGS"
    podman network create --subnet "$SUBNET" --label "refarch.run_id=$RUN_ID" "$@" "$NETWORK" >/dev/null
    ;;
network-destroy)
    # A node whose create failed or was interrupted is tainted, and Terraform
    # runs no destroy provisioner for a tainted resource: this run's own
    # containers still attached (labelled with RUN_ID) are removed first.
    # Anything else attached makes this fail loudly, with podman's message
    # in Terraform's output: a destroy that cannot finish is a defect.
    if [ -n "${RUN_ID:-}" ]; then
        podman ps -a -q --filter "label=refarch.run_id=$RUN_ID" --filter "network=$NETWORK" |
            xargs -r podman rm -f -t 5 >/dev/null
    fi
    # Gone already counts as destroyed.  No --force.
    if ! out=$(podman network rm "$NETWORK" 2>&1); then
        if podman network exists "$NETWORK"; then
            echo "podman network rm $NETWORK: $out" >&2
            exit 1
        fi
    fi
    ;;
node-create)
    eval "$LABEL_ARGS"
    podman run -d --name "$NAME" --hostname "$HOSTNAME_" --no-hosts \
        --network "$NETWORK" --ip "$ADDRESS" \
        --runtime "$RUNTIME" --systemd=always \
        --ulimit nofile=1024:4096 --ulimit nproc=4096:8192 \
        --memory "${MEMORY_MB}m" \
        --device /dev/fuse --cap-add SYS_ADMIN \
        --label "refarch.run_id=$RUN_ID" --label "refarch.node=$HOSTNAME_" "$@" \
        "$IMAGE" /sbin/init >/dev/null
    # Wait for first boot: host keys made and sshd running.
    i=0
    until podman exec "$NAME" systemctl is-active --quiet ssh.service 2>/dev/null; do
        i=$((i + 1))
        if [ "$i" -ge "$BOOT_TIMEOUT" ]; then
            echo "node $HOSTNAME_ ($NAME): sshd not active after ${BOOT_TIMEOUT}s" >&2
            podman logs --tail 20 "$NAME" >&2 || true
            podman exec "$NAME" systemctl status ssh.service >&2 || true
            exit 1
        fi
        sleep 1
    done
    podman exec -i "$NAME" sh -c 'install -d -m 0700 -o debian -g debian /home/debian/.ssh &&
        cat > /home/debian/.ssh/authorized_keys &&
        chown debian:debian /home/debian/.ssh/authorized_keys &&
        chmod 0600 /home/debian/.ssh/authorized_keys' < "$PUBKEY_FILE"
    # The host key is read out of band (as from a cloud console log), so the
    # controller can keep strict host key checking.
    key=$(podman exec "$NAME" cat /etc/ssh/ssh_host_ed25519_key.pub | cut -d' ' -f1,2)
    (
        flock 9
        echo "$ADDRESS $key" >> "$KNOWN_HOSTS"
    ) 9>>"$KNOWN_HOSTS.lock"
    ;;
node-destroy)
    podman rm -f --ignore -t 5 "$NAME" >/dev/null
    ;;
policy-create)
    # New connections to the run's subnet: from its members, or SSH from an
    # admin range (forwarded) or from this host (the controller); replies to
    # what the nodes opened pass; everything else is dropped and counted.
    admin_rule=""
    if [ -n "${ADMIN:-}" ]; then
        admin_rule="ip daddr $SUBNET ip saddr { $ADMIN } tcp dport 22 accept"
    fi
    nft -f - <<EOF_NFT
table inet $TABLE {
    chain forward {
        type filter hook forward priority filter - 5; policy accept;
        ip daddr $SUBNET ct state established,related accept
        ip daddr $SUBNET ip saddr { $MEMBERS } accept
        $admin_rule
        ip daddr $SUBNET counter drop comment "refarch-policy-drop"
    }
    chain output {
        type filter hook output priority filter - 5; policy accept;
        ip daddr $SUBNET ct state established,related accept
        ip daddr $SUBNET tcp dport 22 accept
        ip daddr $SUBNET counter drop comment "refarch-policy-drop"
    }
}
EOF_NFT
    ;;
policy-destroy)
    # Gone already counts as destroyed.
    nft delete table inet "$TABLE" 2>/dev/null || ! nft list table inet "$TABLE" >/dev/null 2>&1
    ;;
*)
    echo "usage: $0 network-create|network-destroy|node-create|node-destroy|policy-create|policy-destroy" >&2
    exit 2
    ;;
esac
