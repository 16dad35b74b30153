#!/bin/bash
#
# devstack plugin for zaqar-delay: storage drivers for Zaqar that add
# delayed delivery, message groups and bounded redelivery.
#
#   enable_plugin zaqar https://opendev.org/openstack/zaqar
#   enable_plugin zaqar-delay <this repository>
#   ZAQAR_DELAY_BACKEND=redis      # or mongodb, swift
#
# Enable it after Zaqar: its post-config phase then edits the zaqar.conf
# that Zaqar's plugin wrote, and its extra phase restarts Zaqar on it.
#
# stack install      install_zaqar_delay
# stack post-config  configure_zaqar_delay
# stack extra        restart_zaqar_for_delay, start_zaqar_delay_gc
# stack test-config  configure_tempest_for_zaqar_delay
# unstack            stop_zaqar_delay_gc

# Save trace setting
_XTRACE_ZAQAR_DELAY=$(set +o | grep xtrace)
set +o xtrace

# install_zaqar_delay - zaqar-delay into the Python environment of Zaqar,
# and the store the chosen backend needs.
function install_zaqar_delay {
    setup_develop $ZAQAR_DELAY_DIR
    if [[ "$ZAQAR_DELAY_BACKEND" == redis ]]; then
        if is_fedora; then
            install_package redis
            restart_service redis
        else
            install_package redis-server
            restart_service redis-server
        fi
    fi
}

# configure_zaqar_delay - point Zaqar's message store at our driver.
function configure_zaqar_delay {
    local section="drivers:message_store:delay.$ZAQAR_DELAY_BACKEND"
    case "$ZAQAR_DELAY_BACKEND" in
        redis)
            iniset $ZAQAR_CONF "$section" uri "$ZAQAR_DELAY_REDIS_URI"
            ;;
        mongodb)
            iniset $ZAQAR_CONF "$section" uri "$ZAQAR_DELAY_MONGODB_URI"
            iniset $ZAQAR_CONF "$section" database \
                "$ZAQAR_DELAY_MONGODB_DATABASE"
            ;;
        swift)
            if ! is_service_enabled s-proxy; then
                die $LINENO "ZAQAR_DELAY_BACKEND=swift needs Swift (s-proxy)"
            fi
            iniset $ZAQAR_CONF "$section" uri "$ZAQAR_DELAY_SWIFT_URI"
            iniset $ZAQAR_CONF "$section" auth_url \
                "$ZAQAR_DELAY_SWIFT_AUTH_URL"
            ;;
        *)
            die $LINENO "ZAQAR_DELAY_BACKEND must be redis, mongodb or" \
                "swift, not '$ZAQAR_DELAY_BACKEND'"
            ;;
    esac
    iniset $ZAQAR_CONF drivers message_store "delay.$ZAQAR_DELAY_BACKEND"
    # One bound for Zaqar's transport and our drivers alike.
    iniset $ZAQAR_CONF transport max_message_delay \
        "$ZAQAR_DELAY_MAX_MESSAGE_DELAY"
    iniset $ZAQAR_CONF transport subscriber_types \
        "$ZAQAR_DELAY_SUBSCRIBER_TYPES"
}

# restart_zaqar_for_delay - Zaqar loads its storage driver at start.
function restart_zaqar_for_delay {
    local service
    for service in zaqar-wsgi zaqar-websocket; do
        if is_service_enabled $service; then
            restart_service devstack@$service
        fi
    done
}

# start_zaqar_delay_gc - the cleanup daemon, when zaqar-delay-gc is enabled.
function start_zaqar_delay_gc {
    run_process zaqar-delay-gc "$(get_python_exec_prefix)/zaqar-delay-gc \
--config-file $ZAQAR_CONF --full_scan_time $ZAQAR_DELAY_GC_FULL_SCAN_TIME"
}

function stop_zaqar_delay_gc {
    stop_process zaqar-delay-gc
}

# configure_tempest_for_zaqar_delay - the [zaqar_delay] group of our
# tempest plugin (install it with TEMPEST_PLUGINS=$ZAQAR_DELAY_DIR).
function configure_tempest_for_zaqar_delay {
    iniset $TEMPEST_CONFIG service_available zaqar True
    iniset $TEMPEST_CONFIG zaqar_delay max_message_delay \
        "$ZAQAR_DELAY_MAX_MESSAGE_DELAY"
}

if [[ "$1" == "stack" && "$2" == "install" ]]; then
    echo_summary "Installing zaqar-delay"
    install_zaqar_delay
elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
    echo_summary "Configuring Zaqar for zaqar-delay"
    configure_zaqar_delay
elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
    echo_summary "Restarting Zaqar on zaqar-delay"
    restart_zaqar_for_delay
    start_zaqar_delay_gc
elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
    configure_tempest_for_zaqar_delay
fi

if [[ "$1" == "unstack" ]]; then
    stop_zaqar_delay_gc
fi

# Restore xtrace
$_XTRACE_ZAQAR_DELAY
