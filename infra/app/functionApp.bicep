// The Function App on a Flex Consumption plan: Node.js, a user-assigned managed identity for
// everything (deployment package, host storage, the app's storage, telemetry), and the app
// settings main.bicep assembles. Holds no secret: there is no connection string with a key.

@description('Function App name (also its default host name prefix).')
param name string

param location string
param tags object = {}

@description('Resource id of the Flex Consumption (FC1) plan.')
param appServicePlanId string

@description('Blob endpoint of the account holding the deployment container, e.g. https://<account>.blob.core.windows.net/.')
param deploymentBlobEndpoint string

@description('Container that receives the deployment package (Flex Consumption deploys from blob storage).')
param deploymentContainerName string

@description('Resource id of the user-assigned managed identity.')
param identityId string

@description('Runtime stack: Flex Consumption sets it here, not with FUNCTIONS_WORKER_RUNTIME.')
param runtimeName string = 'node'

@description('Node.js major version.')
param runtimeVersion string = '22'

@description('Memory per instance in MB (Flex Consumption offers 512, 2048 and 4096).')
@allowed([512, 2048, 4096])
param instanceMemoryMB int = 2048

@description('Upper bound on instances the platform scales out to (at most 1000).')
@maxValue(1000)
param maximumInstanceCount int = 100

@description('App settings (name -> value); see main.bicep for what each one is.')
param appSettings object

module site 'br/public:avm/res/web/site:0.15.1' = {
  name: '${name}-flex-consumption'
  params: {
    kind: 'functionapp,linux'
    name: name
    location: location
    // azd finds the app to deploy the `api` service to by this tag.
    tags: union(tags, { 'azd-service-name': 'api' })
    serverFarmResourceId: appServicePlanId
    managedIdentities: {
      systemAssigned: false
      userAssignedResourceIds: [identityId]
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${deploymentBlobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      runtime: {
        name: runtimeName
        version: runtimeVersion
      }
    }
    siteConfig: {
      alwaysOn: false
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
    }
    // No publishing user name and password: azd and Core Tools deploy with an Entra ID token, so
    // basic authentication on the FTP and SCM (deployment) endpoints only adds a secret that can leak.
    basicPublishingCredentialsPolicies: [
      { name: 'ftp', allow: false }
      { name: 'scm', allow: false }
    ]
    appSettingsKeyValuePairs: appSettings
  }
}

output name string = site.outputs.name
output defaultHostname string = site.outputs.defaultHostname
