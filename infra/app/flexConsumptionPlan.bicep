// The Flex Consumption (FC1) hosting plan, Linux: the platform adds instances as the work-items
// queue grows and removes them when idle (functionApp.bicep sets the per-app bounds).
// Plain resource, no registry module: the properties avm/res/web/serverfarm 0.1.1 sent with the
// parameters main.bicep gave it (including its defaults, kind 'App' among them), so a plan it
// created is updated in place with the same values.

@description('Plan name.')
param name string

@description('Region of the plan.')
param location string

@description('Tags of the plan.')
param tags object = {}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: name
  location: location
  tags: tags
  kind: 'App'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true // Linux: Flex Consumption runs on Linux only
    perSiteScaling: false
    maximumElasticWorkerCount: 1
    targetWorkerCount: 0
    targetWorkerSizeId: 0
    zoneRedundant: false
  }
}

@description('Resource id of the plan, for the Function App\'s serverFarmId.')
output resourceId string = plan.id
