{{/* The release's base name, shortened for DNS labels. */}}
{{- define "sluice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Pod selector of one role; call with (dict "ctx" $ "role" "write"). */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{/* The headless service of a role, which also names its pods in DNS. */}}
{{- define "sluice.headless" -}}
{{- printf "%s-%s" (include "sluice.fullname" .ctx) .role -}}
{{- end -}}

{{/* The DNS suffix of a role's pods: <svc>.<namespace>.svc.<domain>. */}}
{{- define "sluice.podDomain" -}}
{{- printf "%s.%s.svc.%s" (include "sluice.headless" .) .ctx.Release.Namespace .ctx.Values.clusterDomain -}}
{{- end -}}

{{/* The metadata quorum's internal addresses, one per meta pod. */}}
{{- define "sluice.metaAddrs" -}}
{{- $domain := include "sluice.podDomain" (dict "ctx" . "role" "meta") -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.meta.replicas) -}}
{{- $addrs = append $addrs (printf "%s-meta-%d.%s:%d" (include "sluice.fullname" $) $i $domain (int $.Values.ports.meta)) -}}
{{- end -}}
{{- toJson $addrs -}}
{{- end -}}

{{/*
The config file of one role (call with (dict "ctx" $ "role" "write")):
what every pod of the role shares. What differs per pod (node.id,
meta.id, replica.listen, advertised.listeners) comes from the
environment the StatefulSet sets, which takes precedence over the file.
*/}}
{{- define "sluice.config" -}}
{{- $v := .ctx.Values -}}
{{- $p := $v.ports -}}
{{- $c := dict "process.roles" (list .role) "data.dir" "/var/lib/sluice" "admin.addr" (printf "0.0.0.0:%d" (int $p.admin)) -}}
{{- /* The internal ports carry plaintext on the cluster network unless
config sets internal.ssl.* (internal.insecure only relaxes the start-up
check: with internal.ssl.* set, the internal ports are mutual TLS). */ -}}
{{- $_ := set $c "internal.insecure" true -}}
{{- if eq .role "meta" -}}
{{- $peers := list -}}
{{- range $i, $addr := fromJsonArray (include "sluice.metaAddrs" .ctx) -}}
{{- $peers = append $peers (printf "1%d=%s" $i $addr) -}}
{{- end -}}
{{- $_ := set $c "meta.listen" (printf "0.0.0.0:%d" (int $p.meta)) -}}
{{- $_ := set $c "meta.peers" $peers -}}
{{- $_ := set $c "listeners" list -}}
{{- else -}}
{{- $name := upper .role -}}
{{- $_ := set $c "meta.addrs" (fromJsonArray (include "sluice.metaAddrs" .ctx)) -}}
{{- $_ := set $c "listeners" (printf "%s://0.0.0.0:%d,MIXED://0.0.0.0:%d" $name (int (index $p .role)) (int $p.mixed)) -}}
{{- $_ := set $c "listener.security.protocol.map" (printf "%s:PLAINTEXT,MIXED:PLAINTEXT" $name) -}}
{{- $_ := set $c "listener.views" (printf "%s:%s,MIXED:mixed" $name .role) -}}
{{- end -}}
{{- $c = mergeOverwrite $c (deepCopy $v.config) (deepCopy (index $v .role).config) -}}
{{- toYaml $c -}}
{{- end -}}

{{/* The image reference. */}}
{{- define "sluice.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
