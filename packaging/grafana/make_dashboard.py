#!/usr/bin/env python3
"""Writes kelp-dashboard.json beside this file: a Grafana dashboard for the /metrics of the
filer, the volume servers and the mounts (docs/observability.md). Edit the panels here and
rerun; tests/metrics_dashboard_test.sh checks that every metric the dashboard queries is one
that a running filer, volume server or mount exports.

  python3 packaging/grafana/make_dashboard.py
"""
import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = '{job=~"$job", instance=~"$instance"}'
RATE = "$__rate_interval"

# (row title, [(panel title, unit, [(expr, legend)], kind)])
ROWS = [
    ("Filer", [
        ("HTTP requests/s by server", "reqps",
         [(f'sum by (server) (rate(kelp_http_requests_total{SEL}[{RATE}]))', "{{server}}")], "ts"),
        ("Metadata RPCs/s by method", "reqps",
         [(f'sum by (method) (rate(kelp_filer_rpc_seconds_count{SEL}[{RATE}]))', "{{method}}")], "ts"),
        ("Metadata RPC latency p99 by method", "s",
         [(f'histogram_quantile(0.99, sum by (le, method) (rate(kelp_filer_rpc_seconds_bucket{SEL}[{RATE}])))',
           "{{method}}")], "ts"),
        ("Metadata RPC errors/s", "reqps",
         [(f'sum by (method) (rate(kelp_filer_rpc_errors_total{SEL}[{RATE}]))', "{{method}}")], "ts"),
        ("Inodes", "short", [(f"sum(kelp_filer_inodes{SEL})", "inodes")], "stat"),
        ("Mount sessions", "short", [(f"sum(kelp_filer_sessions{SEL})", "sessions")], "stat"),
        ("Metadata RPC connections", "short", [(f"sum(kelp_filer_rpc_connections{SEL})", "connections")], "stat"),
        ("WAL syncs/s (fsync group commits)", "ops",
         [(f"sum(rate(kelp_filer_wal_syncs_total{SEL}[{RATE}]))", "WAL syncs")], "ts"),
        ("Chunk GC", "short",
         [(f"sum(kelp_filer_gc_pending{SEL})", "pending"),
          (f"sum(rate(kelp_filer_gc_deleted_total{SEL}[{RATE}]))", "deleted/s"),
          (f"sum(rate(kelp_filer_gc_failed_total{SEL}[{RATE}]))", "failed/s")], "ts"),
        ("HTTP file API blob traffic", "Bps",
         [(f"sum(rate(kelp_filer_http_blob_get_bytes_total{SEL}[{RATE}]))", "read from volumes"),
          (f"sum(rate(kelp_filer_http_blob_put_bytes_total{SEL}[{RATE}]))", "written to volumes")], "ts"),
        ("Event log sequence", "short", [(f"max(kelp_filer_event_seq{SEL})", "last event")], "stat"),
    ]),
    ("Volume servers", [
        ("Requests/s by method and status", "reqps",
         [(f'sum by (method, code) (rate(kelp_volume_requests_total{SEL}[{RATE}]))', "{{method}} {{code}}")], "ts"),
        ("Request latency p99 by method", "s",
         [(f'histogram_quantile(0.99, sum by (le, method) (rate(kelp_volume_request_seconds_bucket{SEL}[{RATE}])))',
           "{{method}}")], "ts"),
        ("Blob bytes/s in and out", "Bps",
         [(f'sum by (direction) (rate(kelp_volume_bytes_total{SEL}[{RATE}]))', "{{direction}}")], "ts"),
        ("fdatasyncs/s", "ops",
         [(f"sum by (instance) (rate(kelp_volume_fdatasyncs_total{SEL}[{RATE}]))", "{{instance}}")], "ts"),
        ("Stored and garbage bytes", "bytes",
         [(f"sum by (instance) (kelp_volume_bytes{SEL})", "stored {{instance}}"),
          (f"sum by (instance) (kelp_volume_garbage_bytes{SEL})", "garbage {{instance}}")], "ts"),
        ("Needles", "short", [(f"sum(kelp_volume_needles{SEL})", "needles")], "stat"),
        ("Volumes", "short", [(f"sum(kelp_volume_count{SEL})", "volumes")], "stat"),
        ("Memory: index and resident", "bytes",
         [(f"sum by (instance) (kelp_volume_index_memory_bytes{SEL})", "index {{instance}}"),
          (f"sum by (instance) (kelp_volume_resident_bytes{SEL})", "resident {{instance}}")], "ts"),
        ("Checksum failures", "short",
         [(f"sum(increase(kelp_volume_checksum_failures_total{SEL}[$__range]))", "in range")], "stat"),
    ]),
    ("Mounts", [
        ("Read cache hit ratio", "percentunit",
         [(f"sum(rate(kelp_cache_hits_total{SEL}[{RATE}])) / (sum(rate(kelp_cache_hits_total{SEL}[{RATE}])) + "
           f"sum(rate(kelp_cache_misses_total{SEL}[{RATE}])))", "hit ratio")], "ts"),
        ("Cache hits and misses/s by tier", "ops",
         [(f'sum by (tier) (rate(kelp_cache_hits_total{SEL}[{RATE}]))', "hits {{tier}}"),
          (f'sum by (tier) (rate(kelp_cache_misses_total{SEL}[{RATE}]))', "misses {{tier}}")], "ts"),
        ("Cache disk use by tier", "bytes",
         [(f'sum by (tier) (kelp_cache_used_bytes{SEL})', "{{tier}}"),
          (f"sum(kelp_cache_capacity_bytes{SEL})", "capacity")], "ts"),
        ("Cache evictions, checksum failures, disk errors /s", "ops",
         [(f"sum(rate(kelp_cache_evictions_total{SEL}[{RATE}]))", "evictions"),
          (f"sum(rate(kelp_cache_checksum_failures_total{SEL}[{RATE}]))", "checksum failures"),
          (f"sum(rate(kelp_cache_disk_errors_total{SEL}[{RATE}]))", "disk errors")], "ts"),
        ("Blob bytes/s to and from volume servers", "Bps",
         [(f"sum(rate(kelp_mount_blob_get_bytes_total{SEL}[{RATE}]))", "read"),
          (f"sum(rate(kelp_mount_blob_put_bytes_total{SEL}[{RATE}]))", "written")], "ts"),
        ("Blob errors/s", "ops",
         [(f"sum(rate(kelp_mount_blob_get_failovers_total{SEL}[{RATE}]))", "read failovers"),
          (f"sum(rate(kelp_mount_blob_put_retries_total{SEL}[{RATE}]))", "upload retries")], "ts"),
        ("fsync work/s", "ops",
         [(f"sum(rate(kelp_mount_blob_syncs_total{SEL}[{RATE}]))", "volume syncs"),
          (f'sum by (result) (rate(kelp_filer_client_fsyncs_total{SEL}[{RATE}]))', "filer fsyncs {{result}}")],
         "ts"),
        ("Metadata calls/s to the filer by method", "reqps",
         [(f'sum by (method) (rate(kelp_filer_client_calls_total{SEL}[{RATE}]))', "{{method}}")], "ts"),
        ("Read-ahead and ranged reads/s", "ops",
         [(f"sum(rate(kelp_mount_readahead_loads_total{SEL}[{RATE}]))", "read-ahead loads"),
          (f"sum(rate(kelp_mount_readahead_hits_total{SEL}[{RATE}]))", "read-ahead hits"),
          (f"sum(rate(kelp_mount_ranged_reads_total{SEL}[{RATE}]))", "ranged reads")], "ts"),
    ]),
]


def panel(pid, title, unit, targets, kind, x, y):
    w, h = (6, 4) if kind == "stat" else (12, 8)
    p = {
        "id": pid, "title": title, "datasource": DS,
        "type": "stat" if kind == "stat" else "timeseries",
        "gridPos": {"h": h, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DS, "expr": e, "legendFormat": l}
                    for i, (e, l) in enumerate(targets)],
    }
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area"}
    else:
        p["options"] = {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}
        p["fieldConfig"]["defaults"]["custom"] = {"fillOpacity": 10, "lineWidth": 1}
    return p, w, h


def main():
    panels, pid, y = [], 1, 0
    for row, items in ROWS:
        panels.append({"id": pid, "type": "row", "title": row, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid += 1
        y += 1
        x, row_h = 0, 0
        for title, unit, targets, kind in items:
            p, w, h = panel(pid, title, unit, targets, kind, x, y)
            if x + w > 24:
                x, y = 0, y + row_h
                row_h = 0
                p["gridPos"]["x"], p["gridPos"]["y"] = x, y
            panels.append(p)
            pid += 1
            x += w
            row_h = max(row_h, h)
        y += row_h
    dash = {
        "__inputs": [{"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource",
                      "pluginId": "prometheus", "pluginName": "Prometheus"}],
        "title": "Kelp",
        "uid": "kelp-overview",
        "description": "Filer, volume servers and mounts of a Kelp cluster, from their /metrics "
                       "(docs/observability.md). Generated by packaging/grafana/make_dashboard.py.",
        "tags": ["kelp", "storage"],
        "timezone": "browser",
        "schemaVersion": 38,
        "version": 1,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            {"name": "job", "label": "Job", "type": "query", "datasource": DS,
             "query": {"query": "label_values(kelp_http_requests_total, job)", "refId": "job"},
             "definition": "label_values(kelp_http_requests_total, job)",
             "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "refresh": 2},
            {"name": "instance", "label": "Instance", "type": "query", "datasource": DS,
             "query": {"query": 'label_values(kelp_http_requests_total{job=~"$job"}, instance)', "refId": "instance"},
             "definition": 'label_values(kelp_http_requests_total{job=~"$job"}, instance)',
             "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "refresh": 2},
        ]},
        "panels": panels,
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kelp-dashboard.json")
    with open(out, "w") as f:
        json.dump(dash, f, indent=2)
        f.write("\n")
    print(out)


if __name__ == "__main__":
    main()
