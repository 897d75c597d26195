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

{{/* where the lake and the results are: s3://<bucket>/<prefix>/{lake,results} with objectStore
     enabled, else under the lake volume's mount path */}}
{{- define "lagscope.objectPrefix" -}}
{{- $prefix := trimAll "/" .Values.objectStore.prefix -}}
{{- if $prefix -}}
{{- printf "s3://%s/%s" .Values.objectStore.bucket $prefix -}}
{{- else -}}
{{- printf "s3://%s" .Values.objectStore.bucket -}}
{{- end -}}
{{- end -}}

{{- define "lagscope.lakeRoot" -}}
{{- if .Values.objectStore.enabled -}}
{{- printf "%s/lake" (include "lagscope.objectPrefix" .) -}}
{{- else -}}
{{- printf "%s/lake" .Values.lake.mountPath -}}
{{- end -}}
{{- end -}}

{{- define "lagscope.resultsRoot" -}}
{{- if .Values.objectStore.enabled -}}
{{- printf "%s/results" (include "lagscope.objectPrefix" .) -}}
{{- else -}}
{{- printf "%s/results" .Values.lake.mountPath -}}
{{- end -}}
{{- end -}}

{{/* whether the lake is a shared volume (a PVC): not with objectStore enabled */}}
{{- define "lagscope.sharedVolume" -}}
{{- if and .Values.lake.persistence.enabled (not .Values.objectStore.enabled) -}}true{{- end -}}
{{- end -}}

{{/* whether the collector runs the alerts part: config.alerts has routes */}}
{{- define "lagscope.alerts" -}}
{{- if dig "alerts" "routes" list .Values.config -}}true{{- end -}}
{{- end -}}

{{/* whether the alerts' outbox is on its own claim (collector.outbox.persistence) */}}
{{- define "lagscope.outboxVolume" -}}
{{- if and (include "lagscope.alerts" .) .Values.collector.outbox.persistence.enabled -}}true{{- end -}}
{{- end -}}

{{- define "lagscope.outboxClaim" -}}
{{- default (printf "%s-outbox" (include "lagscope.fullname" .)) .Values.collector.outbox.persistence.existingClaim -}}
{{- end -}}

{{/* the outbox file: on its claim, else under the lake's mount (the lake's claim, or the pod's
     emptyDir with a bucket) where `lagscope run` puts it by default beside the results */}}
{{- define "lagscope.outboxFile" -}}
{{- if include "lagscope.outboxVolume" . -}}
{{- printf "%s/alerts-outbox.sqlite" .Values.collector.outbox.mountPath -}}
{{- else -}}
{{- printf "%s/alerts-outbox.sqlite" .Values.lake.mountPath -}}
{{- end -}}
{{- end -}}

{{/* environment of every lagscope container */}}
{{- define "lagscope.env" -}}
- name: LAGSCOPE_COLLECTOR__LAKE
  value: {{ include "lagscope.lakeRoot" . | quote }}
{{- if .Values.objectStore.enabled }}
# the bucket (docs/operations.md "Running on a Spark cluster with an object-store lake"); the
# credentials come from objectStore.credentialsSecret or the pod's identity, never from here
- name: LAGSCOPE_ANALYTICS__RESULTS
  value: {{ include "lagscope.resultsRoot" . | quote }}
{{- with .Values.objectStore.endpoint }}
- name: LAGSCOPE_STORAGE__ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: LAGSCOPE_STORAGE__REGION
  value: {{ .Values.objectStore.region | quote }}
{{- if not (kindIs "invalid" .Values.objectStore.pathStyle) }}
- name: LAGSCOPE_STORAGE__PATH_STYLE
  value: {{ .Values.objectStore.pathStyle | quote }}
{{- end }}
- name: LAGSCOPE_STORAGE__CREDENTIALS
  value: {{ .Values.objectStore.credentials | quote }}
{{- if .Values.objectStore.checksumWhenRequired }}
- name: AWS_REQUEST_CHECKSUM_CALCULATION
  value: when_required
- name: AWS_RESPONSE_CHECKSUM_VALIDATION
  value: when_required
{{- end }}
{{- end }}
- name: HOME
  value: /tmp
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "lagscope.envFrom" -}}
{{- $bucketSecret := and .Values.objectStore.enabled .Values.objectStore.credentialsSecret -}}
{{- if or .Values.existingSecret $bucketSecret }}
envFrom:
{{- if .Values.existingSecret }}
  - secretRef:
      name: {{ .Values.existingSecret }}
{{- end }}
{{- if $bucketSecret }}
  # AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) of the bucket
  - secretRef:
      name: {{ .Values.objectStore.credentialsSecret }}
{{- end }}
{{- end }}
{{- end -}}

{{/* the volumes every lagscope pod has: settings, the lake, a writable /tmp */}}
{{- define "lagscope.volumes" -}}
- name: config
  configMap:
    name: {{ include "lagscope.fullname" . }}
- name: lake
{{- if include "lagscope.sharedVolume" . }}
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
