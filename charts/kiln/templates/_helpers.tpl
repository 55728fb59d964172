{{/* Names: the release name, unless it already says kiln. */}}
{{- define "kiln.fullname" -}}
{{- if contains "kiln" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-kiln" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kiln.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: kiln
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kiln
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component (api, operator, postgresql). */}}
{{- define "kiln.selectorLabels" -}}
app.kubernetes.io/name: kiln
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kiln.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "kiln.secretsKeySecretName" -}}
{{- .Values.secretsKey.existingSecret | default (printf "%s-secrets-key" (include "kiln.fullname" .)) -}}
{{- end -}}

{{- define "kiln.jwtSecretName" -}}
{{- .Values.jwt.existingSecret | default (printf "%s-jwt" (include "kiln.fullname" .)) -}}
{{- end -}}

{{- define "kiln.databaseSecretName" -}}
{{- if .Values.postgresql.enabled -}}
{{- printf "%s-postgresql" (include "kiln.fullname" .) -}}
{{- else -}}
{{- required "database.existingSecret is required (a Secret with the PostgreSQL URL), or set postgresql.enabled=true for an evaluation database" .Values.database.existingSecret -}}
{{- end -}}
{{- end -}}

{{- define "kiln.databaseSecretKey" -}}
{{- if .Values.postgresql.enabled -}}url{{- else -}}{{ .Values.database.secretKey }}{{- end -}}
{{- end -}}

{{/* Pod Security "restricted" for kiln's own pods. */}}
{{- define "kiln.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "kiln.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Environment both roles share. */}}
{{- define "kiln.commonEnv" -}}
- name: KILN_RUNNER
  value: kubernetes
- name: KILN_BUILD_NAMESPACE
  value: {{ .Values.builds.namespace | quote }}
- name: KILN_DATA_DIR
  value: /var/lib/kiln
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "kiln.databaseSecretName" . }}
      key: {{ include "kiln.databaseSecretKey" . }}
# The API seals buildx secrets with it, the operator unseals them: both need the same key.
- name: KILN_SECRETS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "kiln.secretsKeySecretName" . }}
      key: {{ .Values.secretsKey.secretKey }}
{{- end -}}

{{/* The writable places of a kiln pod: the root filesystem is read-only. */}}
{{- define "kiln.volumes" -}}
- name: data
  emptyDir:
    sizeLimit: 1Gi
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- end -}}

{{- define "kiln.volumeMounts" -}}
- name: data
  mountPath: /var/lib/kiln
- name: tmp
  mountPath: /tmp
{{- end -}}
