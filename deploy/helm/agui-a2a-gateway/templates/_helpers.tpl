{{/* Names and labels, as `helm create` makes them. */}}
{{- define "agui-a2a-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agui-a2a-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "agui-a2a-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agui-a2a-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agui-a2a-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "agui-a2a-gateway.labels" -}}
helm.sh/chart: {{ include "agui-a2a-gateway.chart" . }}
{{ include "agui-a2a-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "agui-a2a-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agui-a2a-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Where the pod mounts the config and the secret files (the config refers to the latter). */}}
{{- define "agui-a2a-gateway.configDir" -}}/etc/agui-a2a-gateway/config{{- end }}
{{- define "agui-a2a-gateway.secretsDir" -}}/etc/agui-a2a-gateway/secrets{{- end }}

{{- define "agui-a2a-gateway.apiKeySecret" -}}
{{- printf "%s-api-key" (include "agui-a2a-gateway.fullname" .) }}
{{- end }}

{{- define "agui-a2a-gateway.redisName" -}}
{{- printf "%s-redis" (include "agui-a2a-gateway.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The gateway's config as rendered into the ConfigMap: .Values.config, plus the generated API
key (auth.api_keys) and the bundled Redis (binding_store) when they are on. Fails when the
result would run a gateway nobody has to authenticate to, unless insecure_no_auth says so.
*/}}
{{- define "agui-a2a-gateway.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- if .Values.apiKey.generate }}
{{- $auth := get $cfg "auth" | default dict }}
{{- $keys := get $auth "api_keys" | default list }}
{{- $key := dict "name" .Values.apiKey.name "key" (printf "file:%s/api-key" (include "agui-a2a-gateway.secretsDir" .)) }}
{{- $_ := set $auth "api_keys" (append $keys $key) }}
{{- $_ := set $cfg "auth" $auth }}
{{- end }}
{{- if and .Values.redis.bundled.enabled (eq (toString (get $cfg "binding_store" | default "memory")) "memory") }}
{{- $_ := set $cfg "binding_store" (printf "redis://%s:6379/0" (include "agui-a2a-gateway.redisName" .)) }}
{{- end }}
{{- $auth := get $cfg "auth" | default dict }}
{{- if not (or (get $auth "api_keys") (get $auth "jwt") (get $cfg "insecure_no_auth")) }}
{{- fail "no inbound auth: keep apiKey.generate, configure config.auth (api_keys or jwt), or set config.insecure_no_auth: true when what is in front of the gateway authenticates every caller" }}
{{- end }}
{{- if hasKey $cfg "listen" }}
{{- fail "config.listen: the pod listens on GATEWAY_LISTEN=0.0.0.0:8080 (the environment overrides the file); remove listen from config" }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* A config timeout in ms (config.timeouts.<name>), or its default. */}}
{{- define "agui-a2a-gateway.timeoutMs" -}}
{{- $t := (.root.Values.config | default dict).timeouts | default dict }}
{{- int64 (get $t .name | default .default) }}
{{- end }}

{{/*
Seconds a proxy must let a stream live: timeouts.run (default 3600000 ms) rounded up, plus 60.
*/}}
{{- define "agui-a2a-gateway.streamSeconds" -}}
{{- $run := include "agui-a2a-gateway.timeoutMs" (dict "root" . "name" "run" "default" 3600000) | int64 }}
{{- add (div (add $run 999) 1000) 60 }}
{{- end }}

{{/*
terminationGracePeriodSeconds: Kubernetes counts it from the start of preStop, so it covers the
preStop sleep, then the drain (timeouts.shutdown_drain, default 20000 ms, rounded up), then 5 s
for the last terminal events and the exit.
*/}}
{{- define "agui-a2a-gateway.terminationGracePeriodSeconds" -}}
{{- $drain := include "agui-a2a-gateway.timeoutMs" (dict "root" . "name" "shutdown_drain" "default" 20000) | int64 }}
{{- add (div (add $drain 999) 1000) (int64 .Values.lifecycle.preStopSleepSeconds) 5 }}
{{- end }}

{{/* Whether more than one replica runs (PodDisruptionBudget). */}}
{{- define "agui-a2a-gateway.multiReplica" -}}
{{- if .Values.autoscaling.enabled }}
{{- if gt (int .Values.autoscaling.minReplicas) 1 }}true{{ end }}
{{- else if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- end }}

{{/* Whether the pod mounts a Secret volume, and which Secret holds `secrets`. */}}
{{- define "agui-a2a-gateway.secretName" -}}
{{- if .Values.existingSecret }}{{ .Values.existingSecret }}{{ else if .Values.secrets }}{{ include "agui-a2a-gateway.fullname" . }}{{ end }}
{{- end }}

{{/* A monitor's authorization: the one given, else the generated API key, else none. */}}
{{- define "agui-a2a-gateway.metricsAuthorization" -}}
{{- if .auth }}
authorization:
  {{- toYaml .auth | nindent 2 }}
{{- else if and .root.Values.apiKey.generate (not (.root.Values.config | default dict).metrics_public) }}
authorization:
  type: Bearer
  credentials:
    name: {{ include "agui-a2a-gateway.apiKeySecret" .root }}
    key: api-key
{{- end }}
{{- end }}
