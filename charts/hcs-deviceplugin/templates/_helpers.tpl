{{/* Chart name, cut to 63 characters (a DNS-1123 label). */}}
{{- define "hcs-deviceplugin.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, unless it already contains the chart name. */}}
{{- define "hcs-deviceplugin.fullname" -}}
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

{{/* The namespace of every namespaced object: namespaceOverride, else the release's. */}}
{{- define "hcs-deviceplugin.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* repository:tag, or repository@digest when image.digest is set (the digest then decides alone). */}}
{{- define "hcs-deviceplugin.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{- define "hcs-deviceplugin.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hcs-deviceplugin.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hcs-deviceplugin.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hcs-deviceplugin.labels" -}}
helm.sh/chart: {{ include "hcs-deviceplugin.chart" . }}
{{ include "hcs-deviceplugin.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "hcs-deviceplugin.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hcs-deviceplugin.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hcs-deviceplugin.poolsConfigMapName" -}}
{{- default (printf "%s-pools" (include "hcs-deviceplugin.fullname" .)) .Values.pools.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The namespace the pool ConfigMaps are watched (and Events written) in. */}}
{{- define "hcs-deviceplugin.kubeNamespace" -}}
{{- default (include "hcs-deviceplugin.namespace" .) .Values.apiSource.kubeNamespace }}
{{- end }}

{{- define "hcs-deviceplugin.kubeLabelSelector" -}}
{{- default (printf "app.kubernetes.io/name=%s,app.kubernetes.io/component=pools" (include "hcs-deviceplugin.name" .)) .Values.apiSource.kubeLabelSelector }}
{{- end }}

{{/* Enabled vendors, comma-separated, in a fixed order; fails when none is enabled. */}}
{{- define "hcs-deviceplugin.vendors" -}}
{{- $enabled := list }}
{{- range $name := list "nvidia" "ascend" "hygon" "cambricon" }}
{{- if (index $.Values.vendors $name).enabled }}
{{- $enabled = append $enabled $name }}
{{- end }}
{{- end }}
{{- if not $enabled }}
{{- fail "hcs-deviceplugin: enable at least one of vendors.nvidia, vendors.ascend, vendors.hygon, vendors.cambricon" }}
{{- end }}
{{- join "," $enabled }}
{{- end }}

{{/*
"true" when at least one enabled vendor needs a privileged container, else "". Printed once, however
many vendors ask: callers compare the output with "true".
*/}}
{{- define "hcs-deviceplugin.privileged" -}}
{{- $privileged := false }}
{{- range $name, $vendor := .Values.vendors }}
{{- if and $vendor.enabled $vendor.privileged }}
{{- $privileged = true }}
{{- end }}
{{- end }}
{{- if $privileged }}true{{ end }}
{{- end }}

{{/*
The host paths of the enabled vendors as a YAML list of {name, path, type, mountPath}, one entry per
path (vendors may share one, e.g. /usr/lib), sorted by path so the output is stable.
*/}}
{{- define "hcs-deviceplugin.vendorHostPaths" -}}
{{- $byPath := dict }}
{{- range $name, $vendor := .Values.vendors }}
{{- if $vendor.enabled }}
{{- range $vendor.hostPaths }}
{{- if not (hasKey $byPath .path) }}
{{- $_ := set $byPath .path (default "" .type) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $root := trimSuffix "/" .Values.hostRoot }}
{{- range $path := keys $byPath | sortAlpha }}
- name: {{ printf "host%s" ($path | lower | replace "/" "-" | replace "_" "-" | replace "." "-") | trunc 63 | trimSuffix "-" }}
  path: {{ $path }}
  type: {{ index $byPath $path | quote }}
  mountPath: {{ printf "%s%s" $root $path }}
{{- end }}
{{- end }}

{{/*
The pod's securityContext: seccomp RuntimeDefault, then podSecurityContext on top (each key given
replaces the chart's, e.g. seLinuxOptions on SELinux hosts).
*/}}
{{- define "hcs-deviceplugin.podSecurityContext" -}}
{{- $context := dict "seccompProfile" (dict "type" "RuntimeDefault") }}
{{- range $key, $value := .Values.podSecurityContext }}
{{- $_ := set $context $key $value }}
{{- end }}
{{- toYaml $context }}
{{- end }}

{{/*
The container's securityContext. Privileged when an enabled vendor asks, else unprivileged with every
capability dropped (plus securityContext.addCapabilities); root with a read-only root filesystem either
way. containerSecurityContext goes on top, each key given replacing the chart's. The one mix the API
refuses, privileged with allowPrivilegeEscalation false, fails the render instead.
*/}}
{{- define "hcs-deviceplugin.containerSecurityContext" -}}
{{- $privileged := eq (include "hcs-deviceplugin.privileged" .) "true" }}
{{- $context := dict
  "privileged" $privileged
  "readOnlyRootFilesystem" true
  "runAsNonRoot" false
  "runAsUser" .Values.securityContext.runAsUser
  "runAsGroup" .Values.securityContext.runAsGroup
  "seccompProfile" (dict "type" "RuntimeDefault") }}
{{- if not $privileged }}
{{- $capabilities := dict "drop" (list "ALL") }}
{{- with .Values.securityContext.addCapabilities }}
{{- $_ := set $capabilities "add" . }}
{{- end }}
{{- $_ := set $context "allowPrivilegeEscalation" false }}
{{- $_ := set $context "capabilities" $capabilities }}
{{- end }}
{{- range $key, $value := .Values.containerSecurityContext }}
{{- $_ := set $context $key $value }}
{{- end }}
{{- if and $privileged (eq (toString (get $context "allowPrivilegeEscalation")) "false") }}
{{- fail "hcs-deviceplugin: containerSecurityContext.allowPrivilegeEscalation=false conflicts with a privileged vendor (the API refuses both together); drop it or set vendors.<name>.privileged=false" }}
{{- end }}
{{- toYaml $context }}
{{- end }}

{{/* An alert's labels: (list SEVERITY EXTRA) gives severity, then prometheusRule.alertLabels over it. */}}
{{- define "hcs-deviceplugin.alertLabels" -}}
{{- $labels := dict "severity" (index . 0) }}
{{- range $key, $value := index . 1 }}
{{- $_ := set $labels $key $value }}
{{- end }}
{{- toYaml $labels }}
{{- end }}
