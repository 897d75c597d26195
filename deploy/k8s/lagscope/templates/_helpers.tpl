{{/* Names, labels and the pieces every lagscope container shares. */}}

{{- define "lagscope.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lagscope.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "lagscope.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "lagscope.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* selector labels of one component: include "lagscope.selector" (list . "collector") */}}
{{- define "lagscope.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "lagscope.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "lagscope.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lagscope.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "lagscope.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "lagscope.lakeClaim" -}}
{{- default (printf "%s-lake" (include "lagscope.fullname" .)) .Values.lake.persistence.existingClaim -}}
{{- end -}}

{{/* environment of every lagscope container */}}
{{- define "lagscope.env" -}}
- name: LAGSCOPE_COLLECTOR__LAKE
  value: {{ printf "%s/lake" .Values.lake.mountPath | quote }}
- name: HOME
  value: /tmp
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "lagscope.envFrom" -}}
{{- if .Values.existingSecret }}
envFrom:
  - secretRef:
      name: {{ .Values.existingSecret }}
{{- end }}
{{- end -}}

{{/* the volumes every lagscope pod has: settings, the lake, a writable /tmp */}}
{{- define "lagscope.volumes" -}}
- name: config
  configMap:
    name: {{ include "lagscope.fullname" . }}
- name: lake
{{- if .Values.lake.persistence.enabled }}
  persistentVolumeClaim:
    claimName: {{ include "lagscope.lakeClaim" . }}
{{- else }}
  emptyDir: {}
{{- end }}
- name: tmp
  emptyDir: {}
{{- end -}}

{{- define "lagscope.volumeMounts" -}}
- name: config
  mountPath: /etc/lagscope
  readOnly: true
- name: lake
  mountPath: {{ .Values.lake.mountPath }}
- name: tmp
  mountPath: /tmp
{{- end -}}
