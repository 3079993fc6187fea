{{/* The objects' name: one agent per node, one release per cluster. */}}
{{- define "mdiag.fullname" -}}
mdiag-agent
{{- end -}}

{{/* Labels the DaemonSet selects its pods by (never change on upgrade). */}}
{{- define "mdiag.selectorLabels" -}}
app.kubernetes.io/name: mdiag-agent
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mdiag.labels" -}}
{{ include "mdiag.selectorLabels" . }}
app.kubernetes.io/part-of: mdiag
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret the pod reads MDIAG_MONGODB_URI from. */}}
{{- define "mdiag.envSecret" -}}
{{- .Values.mongodb.existingSecret | default "mdiag-agent-env" -}}
{{- end -}}

{{/* The web configuration file the agent reads (webConfig). */}}
{{- define "mdiag.webConfigFile" -}}
{{- $w := .Values.webConfig -}}
{{- if $w.tls.secretName }}
tls_server_config:
  cert_file: /etc/mdiag-tls/tls.crt
  key_file: /etc/mdiag-tls/tls.key
  {{- if eq $w.tls.clientAuthType "RequireAndVerifyClientCert" }}
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: /etc/mdiag-tls/ca.crt
  {{- end }}
{{- end }}
{{- with $w.basicAuthUsers }}
basic_auth_users:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
