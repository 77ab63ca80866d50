// Everything the coordinator needs in one resource group, for `azd up` (or `az deployment sub
// create`): a Flex Consumption Function App on Node.js 22, a storage account with shared-key
// access disabled, a user-assigned managed identity holding data-plane roles only, and Application
// Insights with local authentication disabled. Every app setting the app reads is set here with the
// app's own default (shared/config/settings.ts DEFAULTS); test/unit/infra keeps the two in step.
//
// Not here: networking (VNet integration, private endpoints). The storage account accepts public
// traffic authenticated with Entra ID only; add network rules for a locked-down deployment.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name; it seeds the unique suffix of every resource name.')
param environmentName string

@minLength(1)
@description('Region for all resources; it must offer Flex Consumption (az functionapp list-flexconsumption-locations).')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Optional resource group name; default rg-<environmentName>.')
param resourceGroupName string = ''

@description('Optional Function App name; default func-<unique suffix>.')
param functionAppName string = ''

@description('Upper bound on Function App instances (Flex Consumption allows up to 1000).')
@maxValue(1000)
param maximumInstanceCount int = 100

@description('Redundancy of the app\'s storage account.')
@allowed(['Standard_LRS', 'Standard_ZRS', 'Standard_GRS', 'Standard_GZRS'])
param storageSkuName string = 'Standard_LRS'

@description('Memory per instance in MB.')
@allowed([512, 2048, 4096])
param instanceMemoryMB int = 2048

// ---- One coordinator across apps or regions -------------------------------------------------
// Leave both empty: the app's own storage account holds the lease, queues and results. To run one
// coordinator across several apps (regions, slots), create one account for it and point every app
// at it: its leader lease, jobs queue, work-items queue and results then live there, and only one
// app's instance leads at a time. Each app keeps its own account for the host and Durable.
@description('Optional existing storage account shared by several apps for the lease, queues and results.')
param coordinatorStorageAccountName string = ''

@description('Resource group of coordinatorStorageAccountName (same subscription); default: this deployment\'s group.')
param coordinatorStorageResourceGroupName string = ''

// ---- App settings with the app's defaults (shared/config/settings.ts DEFAULTS) --------------
@description('TASK_HUB_NAME: Durable Functions task hub (host.json reads it as %TASK_HUB_NAME%). Apps sharing one AzureWebJobsStorage account need different names.')
@minLength(3)
@maxLength(45)
param taskHubName string = 'CoordinatorHub'

@description('LEADER_LEASE_CONTAINER: container of the leader-election blob.')
param leaderLeaseContainer string = 'leader-election'

@description('LEADER_LEASE_BLOB: the blob whose lease elects the leader (used for nothing else).')
param leaderLeaseBlob string = 'coordinator'

@description('LEADER_LEASE_SECONDS: blob lease duration L.')
@minValue(15)
@maxValue(60)
param leaderLeaseSeconds int = 15

@description('LEADER_RENEW_DEADLINE_SECONDS: step down if no renewal succeeded for this long. Empty: 2/3 of the lease duration.')
param leaderRenewDeadlineSeconds string = ''

@description('LEADER_RETRY_PERIOD_SECONDS: campaign/renew retry period (decimals allowed).')
param leaderRetryPeriodSeconds string = '2'

@description('LEADER_REQUEST_TIMEOUT_SECONDS: hard limit on one lease request. Empty: the smaller of 2 s and half the renew deadline.')
param leaderRequestTimeoutSeconds string = ''

@description('LEADER_STALL_TIMEOUT_SECONDS: a leader whose work made no progress for this long steps down.')
param leaderStallTimeoutSeconds string = '120'

@description('LEADER_DRAIN_TIMEOUT_SECONDS: graceful stop waits this long for leader work before releasing the lease.')
param leaderDrainTimeoutSeconds string = '2'

@description('LEADER_PASS_INTERVAL_SECONDS: while leading, run a coordination pass this often.')
param leaderPassIntervalSeconds string = '1'

@description('LEADER_IDLE_PASS_INTERVAL_SECONDS: while passes find no work, the pass interval grows up to this.')
param leaderIdlePassIntervalSeconds string = '15'

@description('LEADER_WATCH_INTERVAL_SECONDS: an instance that does not campaign reads the lease this often and rings the work-items doorbell while nobody holds it; 0 turns it off.')
param leaderWatchIntervalSeconds string = '2'

@description('LEADER_TIMER_SCHEDULE: six-field NCRONTAB (UTC) of the leader timer.')
param leaderTimerSchedule string = '*/5 * * * * *'

@description('JOBS_QUEUE: queue of job submissions.')
param jobsQueue string = 'jobs'

@description('WORK_ITEMS_QUEUE: queue of chunk messages every instance works.')
param workItemsQueue string = 'work-items'

@description('JOB_RESULTS_CONTAINER: container of chunk results.')
param jobResultsContainer string = 'job-results'

@description('JOB_INDEX_TABLE: the table of the job index (one row per job, what the job list reads), created by the app.')
@minLength(3)
@maxLength(63)
param jobIndexTable string = 'jobindex'

@description('JOB_INPUT_CONTAINERS: the containers jobs may read (itemsBlob, wordcount items): comma-separated names or prefixes written like inputs-*.')
param jobInputContainers string = 'job-inputs'

@description('JOB_RETENTION_DAYS: days after its end before the leader purges a finished job (history, records, blobs); 0 keeps them.')
@minValue(0)
@maxValue(3650)
param jobRetentionDays int = 30

@description('JOB_DISPATCH_WINDOW: chunks of one job queued or running at once (fair share between jobs, shallow queues).')
@minValue(1)
@maxValue(1000)
param jobDispatchWindow int = 256

@description('JOB_CHUNKS_PER_MESSAGE: chunks sent together travel up to this many to a work-items message (fewer queue transactions); 1 spreads a job over more instances.')
@minValue(1)
@maxValue(16)
param jobChunksPerMessage int = 4

@description('JOB_REPLY_QUEUES: the queues a submission\'s replyTo may name (its outcome goes there): comma-separated names or prefixes written like replies-*. Named ones are created.')
param jobReplyQueues string = 'job-replies'

@description('JOB_OUTCOMES_QUEUE: the app-wide outcome stream (every job\'s terminal outcome); empty: none.')
param jobOutcomesQueue string = ''

@description('JOB_CALLBACK_HOSTS: hosts a submission\'s callbackUrl may name (exact, or *.suffix), comma-separated; empty: callbacks are refused.')
param jobCallbackHosts string = ''

@description('JOB_CALLBACK_SECRET: the HMAC-SHA256 key callbacks are signed with (at least 32 characters when JOB_CALLBACK_HOSTS names hosts); better a Key Vault reference.')
@secure()
param jobCallbackSecret string = ''

@description('COORDINATOR_LOG_LEVEL: lowest level of the app\'s structured log lines (debug, info, warn, error).')
@allowed(['debug', 'info', 'warn', 'error'])
param coordinatorLogLevel string = 'info'

@description('Optional object id of whoever deploys (azd fills it: AZURE_PRINCIPAL_ID). It gets Storage Blob and Queue Data Contributor on the account that holds the jobs, to upload inputs (coordinator submit), submit by queue, read results and the poison queue, and use Storage Explorer with shared keys off. Empty: no role for anyone but the app.')
param deployerPrincipalId string = ''

@description('User for a person, ServicePrincipal for a pipeline.')
@allowed(['User', 'ServicePrincipal', 'Group'])
param deployerPrincipalType string = 'User'

@description('Optional e-mail address the two alert rules (no leader for 2 minutes; a job failed or stalled) notify; empty: they fire in Azure Monitor only.')
param alertEmailAddress string = ''

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var appName = !empty(functionAppName) ? functionAppName : 'func-${resourceToken}'
// Flex Consumption reads the deployment package from this container, with the app's identity.
var deploymentContainerName = 'app-package-${take(toLower(appName), 32)}-${take(toLower(uniqueString(appName, resourceToken)), 7)}'
var storageSuffix = environment().suffixes.storage
var sharesCoordinatorStorage = !empty(coordinatorStorageAccountName)

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: !empty(resourceGroupName) ? resourceGroupName : 'rg-${environmentName}'
  location: location
  tags: tags
}

// Every resource is declared in infra/ (app/*.bicep): no module comes from a registry, so the
// template builds offline and a deployment depends on nothing but Azure (npm run infra:check).
module identity 'app/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-${resourceToken}'
    location: location
    tags: tags
  }
}

module plan 'app/flexConsumptionPlan.bicep' = {
  name: 'plan'
  scope: rg
  params: {
    name: 'plan-${resourceToken}'
    location: location
    tags: tags
  }
}

// Shared-key access disabled, public blob access off, TLS 1.2 (app/storageAccount.bicep).
module storage 'app/storageAccount.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: 'st${resourceToken}'
    location: location
    tags: tags
    skuName: storageSkuName
    deploymentContainerName: deploymentContainerName
  }
}

module logAnalytics 'app/logAnalytics.bicep' = {
  name: 'logAnalytics'
  scope: rg
  params: {
    name: 'log-${resourceToken}'
    location: location
    tags: tags
    retentionInDays: 30
  }
}

// Telemetry is accepted only with an Entra ID token (app/applicationInsights.bicep, monitoringAccess.bicep).
module monitoring 'app/applicationInsights.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    name: 'appi-${resourceToken}'
    location: location
    tags: tags
    workspaceResourceId: logAnalytics.outputs.resourceId
  }
}

module hostStorageAccess 'app/storageAccess.bicep' = {
  name: 'hostStorageAccess'
  scope: rg
  params: {
    storageAccountName: storage.outputs.name
    principalId: identity.outputs.principalId
    hostStorage: true
  }
}

// The shared account holds blobs, queues and the job index table (Durable's tables stay in each app's own account).
module coordinatorStorageAccess 'app/storageAccess.bicep' = if (sharesCoordinatorStorage) {
  name: 'coordinatorStorageAccess-${resourceToken}'
  scope: resourceGroup(!empty(coordinatorStorageResourceGroupName) ? coordinatorStorageResourceGroupName : rg.name)
  params: {
    storageAccountName: coordinatorStorageAccountName
    principalId: identity.outputs.principalId
    hostStorage: false
  }
}

module monitoringAccess 'app/monitoringAccess.bicep' = {
  name: 'monitoringAccess'
  scope: rg
  params: {
    applicationInsightsName: monitoring.outputs.name
    principalId: identity.outputs.principalId
  }
}

var coordinatorAccountName = sharesCoordinatorStorage ? coordinatorStorageAccountName : storage.outputs.name

// The deployer's data roles on the account that holds the jobs (the app's own account unless shared).
module deployerAccess 'app/deployerAccess.bicep' = if (!empty(deployerPrincipalId)) {
  name: 'deployerAccess-${resourceToken}'
  scope: resourceGroup(sharesCoordinatorStorage && !empty(coordinatorStorageResourceGroupName) ? coordinatorStorageResourceGroupName : rg.name)
  params: {
    storageAccountName: coordinatorAccountName
    principalId: deployerPrincipalId
    principalType: deployerPrincipalType
  }
}

// The workbook and the two alert rules (docs/operations.md, Alerts).
module monitoringAlerts 'app/monitoringAlerts.bicep' = {
  name: 'monitoringAlerts'
  scope: rg
  params: {
    applicationInsightsName: monitoring.outputs.name
    location: location
    tags: tags
    alertEmailAddress: alertEmailAddress
  }
}

module coordinatorStorage 'app/coordinatorStorage.bicep' = {
  name: 'coordinatorStorage-${resourceToken}'
  scope: resourceGroup(sharesCoordinatorStorage && !empty(coordinatorStorageResourceGroupName) ? coordinatorStorageResourceGroupName : rg.name)
  params: {
    storageAccountName: coordinatorAccountName
    // The reply queues named exactly, and the outcome stream, are created too (the app also creates them when missing).
    queueNames: concat([jobsQueue, workItemsQueue], filter(map(split(jobReplyQueues, ','), q => trim(q)), q => !empty(q) && !endsWith(q, '*')), empty(jobOutcomesQueue) ? [] : [jobOutcomesQueue])
    // The input containers named exactly are created too; prefixes (inputs-*) are the user's to create.
    // Not the results container (JOB_RESULTS_CONTAINER): the app creates it at its first start.
    containerNames: concat([leaderLeaseContainer], filter(map(split(jobInputContainers, ','), c => trim(c)), c => !empty(c) && !endsWith(c, '*')))
  }
}

// Every app setting, by who reads it. test/unit/infra/settingsParity.test.ts parses this object:
// each key must be read by the app (shared/config/settings.ts) or by the Functions host.
var appSettings = {
  // The host's own storage (timers, queue-trigger bookkeeping, Durable's task hub): identity-based.
  AzureWebJobsStorage__blobServiceUri: 'https://${storage.outputs.name}.blob.${storageSuffix}'
  AzureWebJobsStorage__queueServiceUri: 'https://${storage.outputs.name}.queue.${storageSuffix}'
  AzureWebJobsStorage__tableServiceUri: 'https://${storage.outputs.name}.table.${storageSuffix}'
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identity.outputs.clientId
  // The app's own blobs, queues and table (lease, jobs, work items, results, the job index): the
  // queue trigger binds to this connection too.
  CoordinatorStorage__blobServiceUri: 'https://${coordinatorAccountName}.blob.${storageSuffix}'
  CoordinatorStorage__queueServiceUri: 'https://${coordinatorAccountName}.queue.${storageSuffix}'
  CoordinatorStorage__tableServiceUri: 'https://${coordinatorAccountName}.table.${storageSuffix}'
  CoordinatorStorage__credential: 'managedidentity'
  CoordinatorStorage__clientId: identity.outputs.clientId
  // Telemetry with Entra ID: the connection string says where, the authentication string says who.
  APPLICATIONINSIGHTS_CONNECTION_STRING: monitoring.outputs.connectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identity.outputs.clientId};Authorization=AAD'
  TASK_HUB_NAME: taskHubName
  LEADER_LEASE_CONTAINER: leaderLeaseContainer
  LEADER_LEASE_BLOB: leaderLeaseBlob
  LEADER_LEASE_SECONDS: string(leaderLeaseSeconds)
  LEADER_RENEW_DEADLINE_SECONDS: leaderRenewDeadlineSeconds
  LEADER_RETRY_PERIOD_SECONDS: leaderRetryPeriodSeconds
  LEADER_REQUEST_TIMEOUT_SECONDS: leaderRequestTimeoutSeconds
  LEADER_STALL_TIMEOUT_SECONDS: leaderStallTimeoutSeconds
  LEADER_DRAIN_TIMEOUT_SECONDS: leaderDrainTimeoutSeconds
  LEADER_PASS_INTERVAL_SECONDS: leaderPassIntervalSeconds
  LEADER_IDLE_PASS_INTERVAL_SECONDS: leaderIdlePassIntervalSeconds
  LEADER_WATCH_INTERVAL_SECONDS: leaderWatchIntervalSeconds
  LEADER_TIMER_SCHEDULE: leaderTimerSchedule
  JOBS_QUEUE: jobsQueue
  WORK_ITEMS_QUEUE: workItemsQueue
  JOB_RESULTS_CONTAINER: jobResultsContainer
  JOB_INDEX_TABLE: jobIndexTable
  JOB_INPUT_CONTAINERS: jobInputContainers
  JOB_RETENTION_DAYS: string(jobRetentionDays)
  JOB_DISPATCH_WINDOW: string(jobDispatchWindow)
  JOB_CHUNKS_PER_MESSAGE: string(jobChunksPerMessage)
  JOB_REPLY_QUEUES: jobReplyQueues
  JOB_OUTCOMES_QUEUE: jobOutcomesQueue
  JOB_CALLBACK_HOSTS: jobCallbackHosts
  JOB_CALLBACK_SECRET: jobCallbackSecret
  COORDINATOR_LOG_LEVEL: coordinatorLogLevel
  // Not set, on purpose: JOB_CALLBACK_ALLOW_LOOPBACK (development host only; the app refuses it on
  // Azure), COORDINATOR_INSTANCE_ID (all instances share app settings; each derives
  // its own id from WEBSITE_INSTANCE_ID) and FUNCTIONS_WORKER_RUNTIME (Flex Consumption takes the
  // runtime from functionAppConfig and rejects the setting).
}

// An empty parameter means "the app's default": leave that setting out rather than write "" (a
// present-but-empty setting is noise in the portal, and provisioning merges settings, so it lingers).
var appSettingsWithValues = toObject(filter(items(appSettings), setting => !empty(setting.value)), setting => setting.key, setting => setting.value)

module app 'app/functionApp.bicep' = {
  name: 'functionApp'
  scope: rg
  params: {
    name: appName
    location: location
    tags: tags
    appServicePlanId: plan.outputs.resourceId
    deploymentBlobEndpoint: 'https://${storage.outputs.name}.blob.${storageSuffix}/'
    deploymentContainerName: deploymentContainerName
    identityId: identity.outputs.resourceId
    runtimeName: 'node'
    runtimeVersion: '22'
    instanceMemoryMB: instanceMemoryMB
    maximumInstanceCount: maximumInstanceCount
    appSettings: appSettingsWithValues
  }
  // The host starts as soon as the app exists: its identity must already hold its roles.
  dependsOn: [
    hostStorageAccess
    coordinatorStorageAccess
    monitoringAccess
    coordinatorStorage
  ]
}

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = app.outputs.name
output SERVICE_API_NAME string = app.outputs.name
output SERVICE_API_URI string = 'https://${app.outputs.defaultHostname}'
output AZURE_STORAGE_ACCOUNT_NAME string = storage.outputs.name
output AZURE_COORDINATOR_STORAGE_ACCOUNT string = coordinatorAccountName
output APPLICATIONINSIGHTS_CONNECTION_STRING string = monitoring.outputs.connectionString
